"""A cluster of our own for the fault suite: a PostgreSQL and a Redis on ports 16300-16399 (never the
shared 5432 and 6379), the app's Celery workers against them, each with its own scripted LLM server,
and a rollout job to break things under. Everything here can be killed or restarted mid-job.

The test process reads the cluster's database with psycopg directly: its own Django connection is the
shared test database's.
"""

import glob
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

import psycopg

from tests.support.llm_stub import AnswerGate, StubLLM
from tests.support.parallel import free_port
from tests.support.processes import ROOT, WorkerProcess
from tests.support.scripts import pipeline_responder

PORTS = range(16300, 16400)
USERNAME, PASSWORD = "ops", "fault-suite-password-9"
TASKS = 15  # a job's units: its tasks x 2 rollouts


def servers_missing() -> str | None:
    """Why the suite cannot run here, or None."""
    if not glob.glob("/usr/lib/postgresql/*/bin/initdb"):
        return "PostgreSQL's server binaries are not installed (/usr/lib/postgresql/*/bin)"
    if not shutil.which("redis-server"):
        return "redis-server is not installed"
    return None


def wait_until(predicate, *, timeout: float, interval: float = 0.2, what: str):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := predicate():
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Postgres:
    """A throwaway cluster; run as the `postgres` user when we are root (the server refuses root)."""

    def __init__(self, root: Path):
        self.bin = Path(sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1])
        self.root, self.data, self.port = root, root / "data", free_port(PORTS)
        self.user = "postgres" if os.geteuid() == 0 else None
        root.mkdir(exist_ok=True)
        if self.user:
            shutil.chown(root, self.user)

    def _run(self, *args: str) -> None:
        result = subprocess.run(args, user=self.user, capture_output=True, text=True, cwd=self.root)
        if result.returncode != 0:
            raise RuntimeError(f"{Path(args[0]).name} failed: {result.stdout}{result.stderr}")

    def init(self) -> "Postgres":
        self._run(str(self.bin / "initdb"), "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        return self

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off -c full_page_writes=off"
        pg_ctl = str(self.bin / "pg_ctl")
        # -t: a start waits out a loaded machine's slow recovery instead of giving up after pg_ctl's 60 s
        self._run(pg_ctl, "-D", str(self.data), "-o", options, "-l", str(self.root / "log"), "-w", "-t", "300", "start")

    def stop(self) -> None:
        """A fast shutdown: every connection is ended, as in a restart or a failover."""
        self._run(str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "fast", "-w", "-t", "300", "stop")

    def url(self, database: str) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        with psycopg.connect(self.url(database), autocommit=True) as conn:
            conn.execute(sql)


class Redis:
    """A Redis without persistence: killed and started again, it comes back empty (the broker's queue is gone)."""

    def __init__(self, root: Path):
        self.root, self.port, self.proc = root, free_port(PORTS), None

    def start(self) -> None:
        command = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"]
        self.proc = subprocess.Popen([*command, "--dir", str(self.root)], stdout=subprocess.DEVNULL)
        wait_until(self._answers, timeout=20, what="redis-server to answer")

    def _answers(self) -> bool:
        return self._command(b"PING").startswith(b"+PONG")

    def flush(self) -> None:
        """Empty every database: a job's leftover messages must not reach the next job's workers."""
        if not self._command(b"FLUSHALL").startswith(b"+OK"):
            raise RuntimeError("redis-server did not flush")

    def _command(self, command: bytes) -> bytes:
        with socket.socket() as conn, suppress(OSError):
            conn.connect(("127.0.0.1", self.port))
            conn.sendall(command + b"\r\n")
            return conn.recv(16)
        return b""

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=30)

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"


def manage(env: dict, *args: str, timeout: float = 300) -> str:
    result = subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )
    if result.returncode != 0:
        raise RuntimeError(f"manage.py {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}")
    return result.stdout


SEED = """
from simia_web.accounts.services import user_create
from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
from rest_framework.authtoken.models import Token
from tests.support.scripts import SHOP, tasks_answer

domain = domain_ensure(name="shop")
apis_store(domain=domain, apis=SHOP["apis"], state_schema=SHOP["state_schema"], initial_state=SHOP["initial_state"])
tasks_store(domain=domain, tasks=tasks_answer({tasks})["tasks"][:{tasks}])
user = user_create(username="{username}", role="admin", password="{password}")
print(Token.objects.create(user=user).key)
"""

QUEUE = """
from simia_web.synthesis.services import rollout_queue
print(rollout_queue(domain="shop", rollouts=2, tasks={tasks}).pk)
"""


class Servers:
    """The PostgreSQL and Redis of a test session, with a migrated and seeded template database."""

    TEMPLATE = "faults_template"

    def __init__(self, root: Path, *, tasks: int = TASKS, heartbeat: float = 2.0):
        self.postgres = Postgres(root / "pg")
        self.redis = Redis(root)
        self.databases = 0
        self.tasks, self.heartbeat = tasks, heartbeat

    def start(self) -> "Servers":
        self.postgres.init().start()
        self.redis.start()
        self.postgres.execute(f"CREATE DATABASE {self.TEMPLATE}")
        env = self.env(self.TEMPLATE)
        manage(env, "migrate", "--noinput")
        seed = SEED.format(tasks=self.tasks, username=USERNAME, password=PASSWORD)
        self.token = manage(env, "shell", "-c", seed).strip().splitlines()[-1]
        return self

    def stop(self) -> None:
        self.redis.kill()
        with suppress(RuntimeError):
            self.postgres.stop()

    def new_database(self) -> str:
        self.databases += 1
        name = f"faults_{self.databases}"
        self.postgres.execute(f"CREATE DATABASE {name} TEMPLATE {self.TEMPLATE}")
        return name

    def env(self, database: str, **extra: str) -> dict:
        keep = {k: v for k, v in os.environ.items() if not k.startswith(("SIMIA_", "CELERY_", "OPENAI_", "DATABASE"))}
        return {
            **keep,
            "DATABASE_URL": self.postgres.url(database),
            "CELERY_BROKER_URL": self.redis.url(),
            "SIMIA_MODEL": "stub-model",
            "SIMIA_LLM_BACKOFF_BASE": "0.01",
            # The suite's beat of 2 s (leases of 6 s) heals in seconds and outlasts a busy machine's stalls of a
            # heartbeat thread; production's 5 s takes longer.
            "SIMIA_UNIT_HEARTBEAT_SECONDS": str(self.heartbeat),
            "CELERY_VISIBILITY_TIMEOUT": "3600",  # Redis's own redelivery never does the watchdog's work here
            "SIMIA_PROFILE_CACHE_SECONDS": "2",  # reads of the database mid-unit, as in a long production run
            # Every thread's request held at the gate at once, the moment to break something: the gate's waits would
            # read as an overloaded endpoint and bring the adaptive limit down.
            "SIMIA_LLM_ADAPTIVE_CONCURRENCY": "0",
            **extra,
        }


class FaultRun:
    """One job on a fresh database of the session's cluster: workers (each with its own scripted LLM server,
    so that every request can be traced to the worker that sent it) and what the job did, read back.

    The servers answer the job's first `answers_before_fault` requests; then they hold every request until
    `fault_strikes` has found each worker thread waiting on one, and answer again once the fault is under way.
    """

    def __init__(self, servers: Servers, *, latency: float, answers_before_fault: int = 40):
        self.servers = servers
        self.database = servers.new_database()
        servers.redis.flush()
        self.env = servers.env(self.database)
        self.latency = latency
        self.gate = AnswerGate(answers_before_fault)
        self.threads = 0  # of every worker started
        self.workers: list[tuple[WorkerProcess, StubLLM]] = []
        self.others: list[subprocess.Popen] = []
        self.job_id = None
        self.killed_worker_units: set[int] = set()

    def worker(self, *, concurrency: int = 4, **extra_env: str) -> tuple[WorkerProcess, StubLLM]:
        stub = StubLLM(responder=pipeline_responder(), latency=self.latency).start()
        stub.gate = self.gate
        self.threads += concurrency
        env = {**self.env, "OPENAI_BASE_URL": stub.url, **extra_env}
        name = f"w{len(self.workers) + 1}@%h"
        worker = WorkerProcess(env, concurrency, hostname=name).start()
        self.workers.append((worker, stub))
        return worker, stub

    def queue_job(self) -> int:
        queue = QUEUE.format(tasks=self.servers.tasks)
        self.job_id = int(manage(self.env, "shell", "-c", queue).strip().splitlines()[-1])
        return self.job_id

    def close(self) -> None:
        for worker, stub in self.workers:
            try:
                worker.stop()
            except subprocess.TimeoutExpired:
                worker.kill()
            stub.stop()
        for proc in self.others:
            proc.terminate()
            with suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=30)
        with suppress(psycopg.Error):
            self.servers.postgres.execute(f"DROP DATABASE IF EXISTS {self.database} WITH (FORCE)")

    # -- reading what happened -------------------------------------------------------------------

    def query(self, sql: str, *params) -> list[tuple]:
        with psycopg.connect(self.servers.postgres.url(self.database), autocommit=True) as conn:
            return conn.execute(sql, params).fetchall()

    def units(self) -> list[dict]:
        rows = self.query(
            "SELECT id, status, attempts, error, lease_holder, extract(epoch FROM dispatched_at)::float8,"
            " extract(epoch FROM finished_at)::float8 FROM jobs_jobunit WHERE job_id = %s ORDER BY id",
            self.job_id,
        )
        names = ("id", "status", "attempts", "error", "lease_holder", "dispatched_at", "finished_at")
        return [dict(zip(names, row, strict=True)) for row in rows]

    def job_status(self) -> str:
        return self.query("SELECT status FROM jobs_job WHERE id = %s", self.job_id)[0][0]

    def fault_strikes(self, *, timeout: float = 120) -> None:
        """Returns once every worker thread waits for an answer, mid-job: the moment to break something."""
        if not self.gate.wait_held(self.threads, timeout=timeout):
            raise AssertionError(f"timed out after {timeout:.0f} s waiting for {self.threads} requests in flight")

    def answer_again(self) -> None:
        self.gate.open()

    def wait_job_end(self, *, timeout: float = 180) -> float:
        """Waits for the job to end; returns when it did (epoch seconds)."""
        wait_until(lambda: self.job_status() not in ("queued", "running"), timeout=timeout, what="the job to end")
        [(ended_at,)] = self.query("SELECT extract(epoch FROM finished_at) FROM jobs_job WHERE id = %s", self.job_id)
        return float(ended_at)

    def trajectories_per_unit(self) -> Counter:
        rows = self.query("SELECT unit_id FROM curation_trajectory WHERE job_id = %s", self.job_id)
        return Counter(unit_id for (unit_id,) in rows)

    def recorded_requests(self) -> Counter:
        """The request of every LLMCall row, as canonical JSON (the client sends exactly the request it records)."""
        rows = self.query("SELECT request FROM llm_llmcall")
        return Counter(_canonical(request) for (request,) in rows)

    def served_requests(self) -> list[Counter]:
        """Per worker, the chat requests its scripted server answered, as canonical JSON."""
        return [Counter(_canonical(request.body) for request in stub.requests) for _, stub in self.workers]


def _canonical(document) -> str:
    return json.dumps(document, sort_keys=True, separators=(",", ":"))


def csrf_token(html: str) -> str:
    return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', html).group(1)
