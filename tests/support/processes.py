import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """A real `celery worker` process (threads pool) with the given environment."""

    def __init__(self, env: dict, concurrency: int = 8, hostname: str = "worker@%h"):
        self.env = env
        self.concurrency = concurrency
        self.hostname = hostname
        self.proc = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def start(self):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "celery",
                "-A",
                "simia_web",
                "worker",
                "--pool",
                "threads",
                "--concurrency",
                str(self.concurrency),
                "--hostname",
                self.hostname,
                "--loglevel",
                "WARNING",
                "--without-gossip",
                "--without-mingle",
                "--without-heartbeat",
            ],
            cwd=ROOT,
            env=self.env,
            start_new_session=True,
        )
        return self

    def kill(self, sig=signal.SIGKILL):
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            self.proc.wait(timeout=30)

    def stop(self):
        self.kill(signal.SIGTERM)
