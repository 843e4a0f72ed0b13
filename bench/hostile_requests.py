"""What each hostile request costs the process that serves it: CPU seconds, peak memory growth and bytes written,
each request run through Django's test client in a forked child (tests.support.cost) on a fresh database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_hostile python bench/hostile_requests.py [--only NAME]

The requests: tool-call arguments of 8,000 objects under `uniqueItems` (an RL step, and the editor's check of a
call), a 51 KB τ² zip whose db.json inflates to 50 MB of `{"a":[[],[],...]}`, a 10 MiB REST body of the same
shape, an RL step whose simulator answers 19 `copy` operations of a collection into itself, a 400 MB upload, a
bulk review action and a snapshot filtered by a 50,000-word query. The database is dropped and made again.
"""

import argparse
import io
import json
import os
import sys
import zipfile
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

UNIQUE_TAGS = {
    "type": "object",
    "properties": {"tags": {"type": "array", "uniqueItems": True, "items": {"type": "object"}}},
    "required": ["tags"],
}
LONG_QUERY = " ".join(f"word{i}" for i in range(50_000))


def database_reset(url: str) -> None:
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        connection.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        connection.execute(f'CREATE DATABASE "{name}"')


def tag_objects(count: int) -> list[dict]:
    return [{"id": i, "label": f"tag {i}", "meta": {"rank": i % 7}} for i in range(count)] + [{"id": 0.0}]


def nested_lists(size: int) -> bytes:
    return b'{"a":[' + b",".join([b"[]"] * (size // 3)) + b"]}"


def tau2_zip(db: bytes) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        files = {"policy.md": b"Be helpful.", "tools.json": b"[]", "tasks.json": b"[]", "db.json": db}
        for name, text in files.items():
            archive.writestr(f"shop/{name}", text)
    return buffer.getvalue()


class MultipartUpload(io.RawIOBase):
    """A multipart body with a file of `size` bytes, made as it is read (the client holds none of it)."""

    BOUNDARY = "simia-boundary"

    def __init__(self, size: int):
        self.head = (
            f'--{self.BOUNDARY}\r\nContent-Disposition: form-data; name="format"\r\n\r\nopenai\r\n'
            f'--{self.BOUNDARY}\r\nContent-Disposition: form-data; name="file"; filename="seeds.jsonl"\r\n\r\n'
        ).encode()
        self.tail = f"\r\n--{self.BOUNDARY}--\r\n".encode()
        self.length, self.position, self.size = len(self.head) + size + len(self.tail), 0, size

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        position, file_end = self.position, len(self.head) + self.size
        if position < len(self.head):
            piece = self.head[position : position + len(buffer)]
        elif position < file_end:
            piece = b"x" * min(len(buffer), file_end - position)
        else:
            piece = self.tail[position - file_end : position - file_end + len(buffer)]
        buffer[: len(piece)] = piece
        self.position += len(piece)
        return len(piece)


def streamed_upload(token: str, size: int):
    """POST /api/v1/seeds/upload/ with a body of `size` bytes streamed to the application (no test client)."""
    from django.test.client import ClientHandler

    upload = MultipartUpload(size)
    environ = {
        "REQUEST_METHOD": "POST",
        "PATH_INFO": "/api/v1/seeds/upload/",
        "SERVER_NAME": "testserver",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BufferedReader(upload, 1 << 16),
        "CONTENT_TYPE": f"multipart/form-data; boundary={MultipartUpload.BOUNDARY}",
        "CONTENT_LENGTH": str(upload.length),
        "HTTP_AUTHORIZATION": f"Token {token}",
        "REMOTE_ADDR": "127.0.0.1",
    }
    return ClientHandler()(environ)


def world() -> dict:
    """Users, the scripted shop domain with a tool whose arguments must be unique, a trajectory and a stub LLM."""
    from django.conf import settings
    from django.test import Client

    from simia_web.accounts.services import user_create, user_token
    from simia_web.catalog.models import Api, Domain, Task
    from simia_web.curation.services import trajectory_create
    from simia_web.llm.models import EndpointProfile
    from tests.support.llm_stub import Reply, StubLLM
    from tests.support.scripts import SHOP

    settings.ALLOWED_HOSTS = ["testserver"]
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    users = {
        role: user_create(username=role, role=role, password="correct-horse-9") for role in ("curator", "annotator")
    }
    domain = Domain.objects.create(
        name="shop", state_schema=SHOP["state_schema"], initial_state=SHOP["initial_state"], policy="Be helpful."
    )
    for api in SHOP["apis"][:2]:
        Api.objects.create(domain=domain, **api)
    Api.objects.create(domain=domain, name="tag_order", kind="write", parameters=UNIQUE_TAGS)
    task = Task.objects.create(domain=domain, instruction="Cancel my order W1.", expected_outcome="W1 cancelled")
    tools = [{"type": "function", "function": {"name": "tag_order", "parameters": UNIQUE_TAGS}}]
    messages = [
        {"role": "user", "content": "Tag my order."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "tag_order", "arguments": "{}"}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "{}"},
        {"role": "assistant", "content": "Done."},
    ]
    trajectory = trajectory_create(
        violations=[], verdict=None, kind="rollout", domain=domain, messages=messages, tools=tools
    )
    copies = [{"op": "copy", "from": "/orders", "path": f"/orders/copy{i}"} for i in range(19)]
    stub = StubLLM(responder=lambda request: Reply(content={"response": "{}", "patch": copies})).start()
    EndpointProfile.objects.create(name="stub", base_url=stub.url, model="stub", is_default=True, timeout_seconds=600)
    rest = Client(HTTP_AUTHORIZATION=f"Token {user_token(user=users['curator'])}")
    curator, annotator = Client(), Client()
    curator.force_login(users["curator"])
    annotator.force_login(users["annotator"])
    token = user_token(user=users["curator"])
    return {
        "task": task,
        "trajectory": trajectory,
        "rest": rest,
        "curator": curator,
        "annotator": annotator,
        "token": token,
    }


def session(w: dict) -> str:
    response = w["rest"].post("/api/v1/envs/", {"task": w["task"].pk}, content_type="application/json")
    assert response.status_code == 201, response.content[:300]
    return response.json()["id"]


def tool_step(w: dict, name: str, arguments: dict):
    call = {"id": "call_1", "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    env = session(w)
    body = {"message": {"content": "", "tool_calls": [call]}}
    return lambda: w["rest"].post(f"/api/v1/envs/{env}/step", body, content_type="application/json")


def requests(w: dict) -> dict:
    from django.conf import settings

    bomb = tau2_zip(nested_lists(settings.SIMIA_IMPORT_MAX_BYTES - 1000))
    body = nested_lists(settings.SIMIA_JSON_MAX_BYTES - 100)
    trajectory = w["trajectory"]
    check = {"call-1-0-name": "tag_order", "call-1-0-args": json.dumps({"tags": tag_objects(8000)})}
    return {
        "uniqueItems, 8,000 objects: RL step": tool_step(w, "tag_order", {"tags": tag_objects(8000)}),
        "uniqueItems, 8,000 objects: editor check": lambda: w["annotator"].post(
            f"/trajectories/{trajectory.pk}/check-call/", check
        ),
        f"τ² zip of {len(bomb) // 1024} KB, db.json 50 MB of nested lists": lambda: w["curator"].post(
            "/seeds/upload/", {"format": "tau2", "file": io.BytesIO(bomb)}
        ),
        "REST body, 10 MiB of nested lists": lambda: w["rest"].post(
            "/api/v1/jobs/", body, content_type="application/json"
        ),
        "RL step, simulator patch of 19 copies": tool_step(w, "cancel_order", {"order_id": "W1", "reason": "x"}),
        "upload of 400 MB": lambda: streamed_upload(w["token"], 400 * 2**20),
        "bulk review, 50,000-word query": lambda: w["curator"].post(
            "/review/bulk/",
            {"action": "reject", "scope": "all", "reason": "noise", "query": urlencode({"q": LONG_QUERY})},
        ),
        "snapshot, 50,000-word filters.q": lambda: w["rest"].post(
            "/api/v1/snapshots/", {"format": "openai", "filters": {"q": LONG_QUERY}}, content_type="application/json"
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="Run the requests whose name contains this.")
    args = parser.parse_args()
    database_reset(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    from tests.support.cost import cost_of

    call_command("migrate", verbosity=0)
    w = world()
    print(f"{'request':<55} {'answer':>6} {'CPU s':>7} {'peak MB':>8} {'written MB':>11}")
    worst_cpu = worst_peak = 0.0
    for name, send in requests(w).items():
        if args.only and args.only not in name:
            continue
        connections.close_all()  # the child opens its own connection, and leaves without closing it

        def answer(send=send):
            try:
                return send().status_code
            except Exception as exc:  # what the test client raised, as a server would have answered 500
                return f"{type(exc).__name__}"

        cost = cost_of(answer)
        worst_cpu, worst_peak = max(worst_cpu, cost.cpu_seconds), max(worst_peak, cost.peak_mb)
        print(f"{name:<55} {cost.result!s:>6} {cost.cpu_seconds:>7.2f} {cost.peak_mb:>8.0f} {cost.written_mb:>11.0f}")
    print(f"worst: {worst_cpu:.2f} CPU seconds, {worst_peak:.0f} MB of peak memory growth")


if __name__ == "__main__":
    main()
