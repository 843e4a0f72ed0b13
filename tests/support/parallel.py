"""Gives each pytest-xdist worker a Redis database, a var folder and a share of the fixed ports of its own.

Loaded with -p (see pyproject.toml), so it runs before pytest-django sets Django up: the settings read
CELERY_BROKER_URL (the broker, and through it the throttle counts and the endpoint limits) and SIMIA_VAR_DIR
(media, exports, the embedded broker's folders) once, at import, and the processes a test starts (Celery
workers, web servers) inherit this environment. pytest-django already gives each worker a database of its own.
Worker N takes the broker's database number plus N; Redis has databases 0-15.
"""

import os
import socket
from contextlib import suppress
from pathlib import Path

_REDIS_DATABASES = 16


def _own_broker(url: str, worker: int) -> str:
    base, _, number = url.rpartition("/")
    database = int(number or 0) + worker
    if database >= _REDIS_DATABASES:
        raise RuntimeError(
            f"test worker {worker} would need Redis database {database} (CELERY_BROKER_URL={url}): "
            "run fewer workers or give the tests a lower database number"
        )
    return f"{base}/{database}"


def _worker() -> tuple[int, int] | None:
    """(this worker's number, the number of workers) under pytest-xdist, else None."""
    worker_id = os.environ.get("PYTEST_XDIST_WORKER")  # gw0, gw1, ...: set before a worker loads any plugin
    if not worker_id:
        return None
    return int(worker_id.removeprefix("gw")), int(os.environ["PYTEST_XDIST_WORKER_COUNT"])


def _isolate(worker: int) -> None:
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker.startswith(("redis://", "rediss://")):
        os.environ["CELERY_BROKER_URL"] = _own_broker(broker, worker)
    var = Path(os.environ.get("SIMIA_VAR_DIR", Path(__file__).resolve().parents[2] / "var"))
    os.environ["SIMIA_VAR_DIR"] = str(var / f"test-gw{worker}")


_handed_out: set[int] = set()


def free_port(ports: range) -> int:
    """A port of this process's share of `ports` that nothing listens on and that was not handed out before (its
    server may not have started yet, or be restarting). Each process probes its own share: a test that restarts a
    server frees its port for a moment, and a test in another process must not take it then."""
    worker = _worker()
    if worker is not None:
        share = len(ports) // worker[1]
        ports = range(ports.start + worker[0] * share, ports.start + (worker[0] + 1) * share)
    for port in ports:
        if port in _handed_out:
            continue
        with socket.socket() as probe, suppress(OSError):
            probe.bind(("127.0.0.1", port))
            _handed_out.add(port)
            return port
    raise RuntimeError(f"no free port in {ports.start}-{ports.stop - 1}")


if (_this_worker := _worker()) is not None:
    _isolate(_this_worker[0])
