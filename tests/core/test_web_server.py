"""The production command's server (gunicorn.conf.py, two worker processes) against what clients do to it: wrong
tokens from many connections at once, and request bodies it must not read."""

import os
import socket
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from django.conf import settings
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import _database_url
from tests.support.parallel import free_port

ROOT = Path(__file__).resolve().parents[2]
PORTS = range(16400, 16500)
METRICS_TOKEN = "web-server-metrics-token"


@pytest.fixture(scope="module")
def server(django_db_setup, tmp_path_factory):
    """`gunicorn -c gunicorn.conf.py simia_web.wsgi` with two workers on the test database and broker."""
    port = free_port(PORTS)
    scratch = tmp_path_factory.mktemp("server-tmp")
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "SIMIA_BIND": f"127.0.0.1:{port}",
        "SIMIA_WEB_WORKERS": "2",
        "SIMIA_WEB_THREADS": "16",
        "TMPDIR": str(scratch),  # where an upload would be spooled to disk
        "SIMIA_METRICS_TOKEN": METRICS_TOKEN,
        "PROMETHEUS_MULTIPROC_DIR": str(tmp_path_factory.mktemp("server-metrics")),
    }
    process = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "simia_web.wsgi"],
        cwd=ROOT,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while True:
        try:
            httpx.get(f"{url}/accounts/login/", timeout=5)
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(process.stderr.read().decode()[-2000:]) from None
            time.sleep(0.3)
    yield {"url": url, "port": port, "scratch": scratch, "pid": process.pid}
    process.terminate()
    process.wait(timeout=30)


def test_wrong_tokens_are_counted_across_worker_processes(server, transactional_db):
    limit = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["bad_token"].split("/")[0])

    def guess(i: int) -> int:
        headers = {"Authorization": f"Token wrong{i:036d}"}
        return httpx.get(f"{server['url']}/api/v1/me/", headers=headers, timeout=60).status_code

    with ThreadPoolExecutor(max_workers=100) as pool:
        statuses = list(pool.map(guess, range(300)))
    assert statuses.count(401) + statuses.count(429) == 300, sorted(set(statuses))
    assert statuses.count(401) <= limit, statuses.count(401)  # DRF's own throttle let 35 through


def test_a_burst_of_right_tokens_from_one_address_is_not_taken_for_guessing(server, transactional_db, users):
    from simia_web.accounts.services import user_token

    headers = {"Authorization": f"Token {user_token(user=users['curator'])}"}  # never used before this burst

    def call(_) -> int:
        return httpx.get(f"{server['url']}/api/v1/me/", headers=headers, timeout=60).status_code

    with ThreadPoolExecutor(max_workers=100) as pool:
        statuses = list(pool.map(call, range(100)))
    assert statuses == [200] * 100, sorted(set(statuses))


def _raw_request(port: int, head: str) -> bytes:
    """Send only the request's head and read the answer: the server must not wait for the body."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as connection:
        connection.sendall(head.encode())
        answer = b""
        while chunk := connection.recv(65536):  # the server closes the connection after its answer
            answer += chunk
    return answer


@pytest.mark.parametrize("path", ["/api/v1/seeds/upload/", "/seeds/upload/"])
def test_a_400_mb_upload_is_refused_before_its_body_is_read(server, path):
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: multipart/form-data; boundary=x\r\n"
        f"Content-Length: {400 * 2**20}\r\n\r\n"
    )
    answer = _raw_request(server["port"], head)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:200]
    assert b"the limit is 53,477,376 bytes (SIMIA_REQUEST_MAX_BYTES)" in answer
    assert list(server["scratch"].iterdir()) == []


def test_a_chunked_body_is_refused(server):
    head = "POST /api/v1/jobs/ HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n"
    answer = _raw_request(server["port"], head)
    assert answer.startswith(b"HTTP/1.1 411"), answer[:200]


WRITER_ONLY_LIBRARIES = ("pyarrow", "matplotlib", "huggingface_hub")


def test_a_web_process_does_not_load_the_libraries_only_export_writers_use():
    # Every gunicorn worker holds what its URLconf imports: pyarrow, matplotlib and huggingface_hub add about
    # 75 MB to each and serve only the worker that writes a Parquet file, a card or a Hub push.
    probe = (
        "import django, sys; django.setup(); from django.urls import get_resolver; get_resolver().url_patterns; "
        f"print([name for name in {WRITER_ONLY_LIBRARIES!r} if name in sys.modules])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "simia_web.settings"}
    loaded = subprocess.run(
        [sys.executable, "-c", probe], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert loaded.stdout.strip() == "[]"


def test_metrics_count_the_requests_of_every_worker_process(server):
    """Each scrape reaches one of the two processes and still counts the requests both served."""
    for _ in range(20):
        assert httpx.get(f"{server['url']}/accounts/login/", timeout=30).status_code == 200
    for _ in range(4):
        exposition = httpx.get(
            f"{server['url']}/metrics", headers={"Authorization": f"Bearer {METRICS_TOKEN}"}, timeout=30
        ).text
        served = sum(
            sample.value
            for family in text_string_to_metric_families(exposition)
            for sample in family.samples
            if sample.name == "simia_http_requests_total" and sample.labels["view"] == "login"
        )
        assert served >= 20, served
    assert httpx.get(f"{server['url']}/healthz", headers={"Host": "10.9.8.7"}, timeout=30).status_code == 200
