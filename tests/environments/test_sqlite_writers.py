"""On the embedded default (SQLite), an RL step waiting on its LLM holds no lock: other writers go through."""

import json
import os
import subprocess
import sys

from tests.conftest import ROOT


def test_writers_go_through_while_a_step_waits_for_the_simulator(tmp_path):
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'simia.sqlite3'}",
        "CELERY_BROKER_URL": f"filesystem://{tmp_path / 'broker'}",
        "SIMIA_VAR_DIR": str(tmp_path),
        "SIMIA_LLM_BACKOFF_BASE": "0.01",
    }
    script = ROOT / "tests" / "environments" / "sqlite_step_writers.py"
    run = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-4000:]
    report = json.loads(run.stdout.strip().splitlines()[-1])
    # Each write finished while the step was still waiting for the simulator's answer.
    assert report["went_through"] == {"job_unit": True, "manage_py": True, "review": True}, report["command"]
    assert report["step"]["info"]["step"] == 1 and not report["step"]["done"]
