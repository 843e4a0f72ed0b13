"""Gives each pytest-xdist worker a Redis database, a var folder and a share of the fixed ports of its own.

Loaded with -p (see pyproject.toml), so it runs before pytest-django sets Django up: the settings read
CELERY_BROKER_URL (the broker, and through it the throttle counts and the endpoint limits) and SIMIA_VAR_DIR
(media, exports, the embedded broker's folders) once, at import, and the processes a test starts (Celery
workers, web servers) inherit this environment. pytest-django already gives each worker a database of its own.
Worker N takes the broker's database number plus N; Redis has databases 0-15.
"""

import os
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


def _isolate(worker_id: str) -> None:
    worker = int(worker_id.removeprefix("gw"))
    broker = os.environ.get("CELERY_BROKER_URL", "")
    if broker.startswith(("redis://", "rediss://")):
        os.environ["CELERY_BROKER_URL"] = _own_broker(broker, worker)
    var = Path(os.environ.get("SIMIA_VAR_DIR", Path(__file__).resolve().parents[2] / "var"))
    os.environ["SIMIA_VAR_DIR"] = str(var / f"test-{worker_id}")


def worker_ports(ports: range) -> range:
    """This process's share of a range of fixed ports. A test that restarts a server frees its port for a moment;
    a test in another process probing the same range could take it then."""
    worker_id = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker_id:
        return ports
    share = len(ports) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"])
    start = ports.start + int(worker_id.removeprefix("gw")) * share
    return range(start, start + share)


if worker_id := os.environ.get("PYTEST_XDIST_WORKER"):  # set in a worker before it loads any plugin
    _isolate(worker_id)
