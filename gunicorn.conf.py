"""gunicorn's settings for the web tier: `gunicorn -c gunicorn.conf.py simia_web.wsgi` (see README, Production).

Threads, not processes, carry the concurrency: a request often waits (an RL step on its simulator, a page on
PostgreSQL), and a waiting thread costs a few MB where a sync worker costs a whole process; two processes per two
cores use both cores despite the GIL. bench/web_load.py measured these against 100 concurrent clients (README).
"""

import os
from pathlib import Path

bind = os.environ.get("SIMIA_BIND", "0.0.0.0:8000")
worker_class = "gthread"
workers = int(os.environ.get("SIMIA_WEB_WORKERS", str(os.cpu_count() or 2)))
threads = int(os.environ.get("SIMIA_WEB_THREADS", "32"))
# A process's threads share a pool of PostgreSQL connections (read by the settings in each worker): one each
# would be 64 connections for two processes, of the 100 PostgreSQL allows by default, which workers also need.
os.environ.setdefault("SIMIA_DB_POOL_SIZE", "8")
# /metrics sums the request metrics of every worker process: prometheus_client's multiprocess mode keeps each
# process's values in a file of this folder (emptied when the server starts, not when a worker is replaced, so
# counters never go back). Set before the application is loaded, which is when prometheus_client reads it.
_var_dir = Path(os.environ.get("SIMIA_VAR_DIR", Path(__file__).resolve().parent / "var"))
os.environ.setdefault("PROMETHEUS_MULTIPROC_DIR", str(_var_dir / "prometheus"))
# A worker process is replaced after this many requests (with jitter, so not all at once): memory a request
# grew it by goes back to the system.
max_requests = 20_000
max_requests_jitter = 2_000
keepalive = 30
# No control socket (gunicornc): its default path is one per user, which several servers on a machine would share.
control_socket_disable = True
# Request lines and headers stay small (gunicorn's defaults, stated): bodies are bounded by the application.
limit_request_line = 4094
limit_request_fields = 100
limit_request_field_size = 8190


def pre_request(worker, req):
    """A body the application answers unread (simia_web.core.uploads) ends its connection after the answer:
    gunicorn would otherwise read the rest of it, looking for the next request on the connection."""
    from simia_web.core.uploads import body_refusal

    headers = dict(req.headers)
    if body_refusal(headers.get("CONTENT-LENGTH"), headers.get("TRANSFER-ENCODING")):
        req.force_close()


def on_starting(server):
    folder = Path(os.environ["PROMETHEUS_MULTIPROC_DIR"])
    folder.mkdir(parents=True, exist_ok=True)
    for leftover in folder.glob("*.db"):  # a previous server's values
        leftover.unlink()


def child_exit(server, worker):
    from prometheus_client import multiprocess

    multiprocess.mark_process_dead(worker.pid)
