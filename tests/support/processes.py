import os
import signal
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


class WorkerProcess:
    """A real `celery worker` process with the given environment, started as an operator would: with a pool
    (threads unless said; None starts it with no pool option, Celery's default prefork) and a concurrency
    (None: Celery's default, a process per CPU)."""

    def __init__(
        self, env: dict, concurrency: int | None = 8, hostname: str = "worker@%h", pool: str | None = "threads"
    ):
        self.env = env
        self.concurrency = concurrency
        self.hostname = hostname
        self.pool = pool
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
                *(["--pool", self.pool] if self.pool else []),
                *(["--concurrency", str(self.concurrency)] if self.concurrency else []),
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
        """A warm shutdown, as an operator's SIGTERM to the worker gives; a worker that outlasts it is killed."""
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
