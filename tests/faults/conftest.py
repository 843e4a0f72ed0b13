import shutil
import tempfile
from pathlib import Path

import pytest

from .cluster import FaultRun, Servers, servers_missing


@pytest.fixture(scope="session")
def fault_servers():
    """A PostgreSQL and a Redis of the suite's own, on ports 16300-16399, for the whole session."""
    if reason := servers_missing():
        pytest.skip(reason)
    # Not pytest's tmp_path: its parents are private to us, and PostgreSQL runs as another user.
    root = Path(tempfile.mkdtemp(prefix="simia-faults-"))
    root.chmod(0o755)
    servers = Servers(root)
    try:
        yield servers.start()
    finally:
        servers.stop()
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def fault_run(fault_servers):
    """A fresh database (copied from the seeded template) and an empty Redis, for one job."""
    run = None

    def start(*, latency: float = 0.15) -> FaultRun:
        nonlocal run
        run = FaultRun(fault_servers, latency=latency)
        return run

    yield start
    if run is not None:
        run.close()
