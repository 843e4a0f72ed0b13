import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.conf import settings
from django.core.cache import cache
from django.db import transaction

from simia_web.accounts.models import Role
from simia_web.accounts.services import user_create
from simia_web.catalog.selectors import catalog_cache_clear
from simia_web.core.throttling import throttles_reset
from simia_web.llm import client as llm_client
from simia_web.llm import services as llm_services
from simia_web.llm.models import EndpointProfile
from simia_web.llm.selectors import profile_cache_clear
from tests.support.llm_stub import StubLLM
from tests.support.processes import WorkerProcess
from tests.support.scripts import pipeline_responder

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = ROOT.parent / "shared" / "data"
PASSWORD = "correct-horse-9"


@pytest.fixture
def eager(settings, transactional_db):
    """Celery tasks run in-process as they are sent: a whole job runs inside the call that queues it."""
    settings.CELERY_TASK_ALWAYS_EAGER = True  # Celery sees the override (simia_web.celery.DjangoCelerySettings)


@pytest.fixture(autouse=True)
def _fast_passwords(settings):
    """Password strength is not under test: the production hasher costs ~0.4 s a user, and most tests make four.
    Servers the tests start as processes of their own keep it, for the users those processes make."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def _fast_llm_retries(settings):
    settings.SIMIA_LLM_BACKOFF_BASE = 0.01
    llm_client._downgrades.clear()
    llm_services._finishing_jobs.clear()  # job ids come round again in later tests
    profile_cache_clear()  # rows of earlier tests are gone, their cached profiles must go too
    catalog_cache_clear()
    cache.clear()
    throttles_reset()  # throttle counts of earlier tests


@pytest.fixture
def llm_stub(db, settings):
    """A scripted OpenAI-compatible server, set as the default endpoint profile."""
    stub = StubLLM(responder=pipeline_responder()).start()
    # The test's own transaction (none under transactional_db) is the only one an LLM call may be made in.
    settings.SIMIA_LLM_ATOMIC_BLOCKS_ALLOWED = len(transaction.get_connection().atomic_blocks)
    EndpointProfile.objects.update(is_default=False)
    stub.profile = EndpointProfile.objects.create(
        name="stub",
        base_url=stub.url,
        model="stub-model",
        is_default=True,
        timeout_seconds=5,
        max_concurrency=32,
        price_input_per_mtok=1,
        price_output_per_mtok=2,
    )
    yield stub
    stub.stop()


@pytest.fixture
def users(db):
    # The admin is a site administrator too (as `make run`'s printed admin is): it reaches the admin site.
    return {
        role: user_create(username=role, role=role, password=PASSWORD, site_admin=role == Role.ADMIN)
        for role in Role.values
    }


@pytest.fixture
def client_for(client, users):
    def login(role: str):
        client.force_login(users[role])
        return client

    return login


def _database_url() -> str:
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("sqlite3"):
        return f"sqlite:///{db['NAME']}"
    user, host, port = db.get("USER") or "postgres", db.get("HOST") or "127.0.0.1", db.get("PORT") or 5432
    return f"postgres://{user}@{host}:{port}/{db['NAME']}"


@pytest.fixture
def celery_worker(transactional_db, settings):
    """Start a worker subprocess against the test database and the broker in CELERY_BROKER_URL."""

    broker = settings.CELERY_BROKER_URL
    if broker.startswith("redis://"):
        import redis

        redis.Redis.from_url(broker).flushdb()
    env = {
        **os.environ,
        "DATABASE_URL": _database_url(),
        "CELERY_BROKER_URL": broker,
        "SIMIA_LLM_BACKOFF_BASE": "0.01",
        "CELERY_VISIBILITY_TIMEOUT": "5",
        "CELERY_RESTORE_INTERVAL": "1",
        "CELERY_RESTORE_THROTTLE": "1",
        "CELERY_RESTORE_LOCK_EXPIRE": "3",
    }
    workers = []

    def start(concurrency: int | None = 8, pool: str | None = "threads", **extra_env):
        worker = WorkerProcess({**env, **extra_env}, concurrency, pool=pool).start()
        workers.append(worker)
        return worker

    start.env = env
    yield start
    for worker in workers:
        worker.stop()


def manage(env, *args, timeout=180):
    """Run `manage.py` in a process of its own with `env`, as an operator's shell would."""
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def embedded_env(tmp_path):
    """The zero-configuration default: SQLite file and filesystem broker, in a scratch folder, with a scripted LLM.
    `start_worker(concurrency, pool)` starts a worker on it (threads unless said; pool None: Celery's default)."""
    stub = StubLLM(responder=pipeline_responder()).start()
    env = {k: v for k, v in os.environ.items() if k not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    env.update(
        SIMIA_VAR_DIR=str(tmp_path), OPENAI_BASE_URL=stub.url, SIMIA_MODEL="stub-model", SIMIA_LLM_BACKOFF_BASE="0.01"
    )
    assert manage(env, "migrate", "--noinput").returncode == 0
    workers = []

    def start_worker(concurrency: int | None = 4, pool: str | None = "threads", **extra_env):
        workers.append(WorkerProcess({**env, **extra_env}, concurrency=concurrency, pool=pool).start())
        return workers[-1]

    yield {"env": env, "stub": stub, "start_worker": start_worker}
    for worker in workers:
        worker.stop()
    stub.stop()


def wait_for(predicate, timeout: float = 60, interval: float = 0.2, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout}s waiting for {message}")
