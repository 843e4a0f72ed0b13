"""Jobs through real Celery workers: Redis + PostgreSQL, the embedded default, and a killed worker."""

import json

import pytest

from simia_web.curation.models import Trajectory
from simia_web.jobs.models import Job, JobStatus, JobUnit, UnitStatus
from simia_web.synthesis.services import synthesis_queue
from tests.conftest import manage, wait_for
from tests.support.llm_stub import Reply

pytestmark = pytest.mark.integration


def _job_done(job):
    job.refresh_from_db()
    return not job.is_active


def test_job_on_redis_and_postgres_worker(celery_worker, llm_stub, settings):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    celery_worker()
    job = synthesis_queue(domains=["shop", "bank"], apis=3, tasks=2, rollouts=2)
    wait_for(lambda: _job_done(job), timeout=120, message="the job to finish")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert Trajectory.objects.filter(job=job).count() == 2 * 2 * 2
    assert job.summary["trajectories"] == {"judged_pass": 8}


def test_killed_worker_loses_and_duplicates_nothing(celery_worker, llm_stub, settings):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    llm_stub.latency = 0.25
    worker = celery_worker(concurrency=4)
    job = synthesis_queue(domains=["shop"], apis=3, tasks=6, rollouts=2)
    wait_for(lambda: Trajectory.objects.filter(job=job).count() >= 2, timeout=120, message="first trajectories")
    worker.kill()  # SIGKILL mid-job: its reserved, unacknowledged messages come back after the visibility timeout
    done_before = Trajectory.objects.filter(job=job).count()
    assert done_before < 12
    celery_worker(concurrency=4)
    wait_for(lambda: _job_done(job), timeout=180, message="the job to finish after the restart")
    assert job.status == JobStatus.SUCCEEDED
    planned = JobUnit.objects.filter(job=job, stage="rollout")
    assert planned.count() == 12
    assert planned.filter(status=UnitStatus.DONE).count() == 12
    trajectories = Trajectory.objects.filter(job=job)
    assert trajectories.count() == 12
    assert set(trajectories.values_list("unit_id", flat=True)) == set(planned.values_list("id", flat=True))


def test_embedded_default_runs_a_job_end_to_end(embedded_env):
    env = embedded_env["env"]
    embedded_env["start_worker"]()
    params = ("--param", "domains=shop", "--param", "apis=3", "--param", "tasks=2", "--param", "rollouts=2")
    result = manage(env, "queue", "synthesize", *params, "--wait")
    assert result.returncode == 0, result.stderr + result.stdout
    assert "succeeded" in result.stdout and '"judged_pass": 4' in result.stdout
    stats = json.loads(manage(env, "stats", "--json").stdout)
    assert stats["trajectories"] == {"judged_pass": 4}
    assert stats["jobs"] == {"succeeded": 1} and stats["domains"] == 1 and stats["apis"] == 2


def test_embedded_worker_killed_mid_job_recovers_on_restart(embedded_env):
    env, stub = embedded_env["env"], embedded_env["stub"]
    stub.latency = 0.3
    worker = embedded_env["start_worker"]()
    params = ("--param", "domains=shop", "--param", "apis=3", "--param", "tasks=4", "--param", "rollouts=2")
    assert manage(env, "queue", "synthesize", *params).returncode == 0

    def trajectories():
        return json.loads(manage(env, "stats", "--json").stdout)["trajectories"].get("judged_pass", 0)

    wait_for(lambda: trajectories() >= 1, timeout=120, interval=0.5, message="first trajectories")
    worker.kill()
    embedded_env["start_worker"]()  # recovers the killed worker's units on start
    wait_for(
        lambda: json.loads(manage(env, "stats", "--json").stdout)["jobs"] == {"succeeded": 1},
        timeout=180,
        interval=1,
        message="the job to finish after the restart",
    )
    assert trajectories() == 8


def test_wait_exits_non_zero_when_the_job_fails(embedded_env):
    env = embedded_env["env"]
    embedded_env["stub"].responder = lambda request: Reply(status=401, error_message="bad key")
    embedded_env["start_worker"]()
    params = ("--param", "domains=shop", "--param", "apis=3", "--param", "tasks=2")
    result = manage(env, "queue", "synthesize", *params, "--wait")
    assert result.returncode != 0
    assert "failed" in result.stdout + result.stderr


def test_cancel_stops_remaining_work(celery_worker, llm_stub, settings):
    from simia_web.jobs.services import job_cancel

    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    llm_stub.latency = 0.2
    celery_worker(concurrency=2)
    job = synthesis_queue(domains=["shop"], apis=3, tasks=8, rollouts=2)
    wait_for(lambda: Trajectory.objects.filter(job=job).exists(), timeout=120, message="a first trajectory")
    job_cancel(job=Job.objects.get(pk=job.pk))
    cancelled_at = Trajectory.objects.filter(job=job).count()
    wait_for(
        lambda: not JobUnit.objects.filter(job=job, status=UnitStatus.PENDING).exists(),
        timeout=30,
        message="no pending units",
    )
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    assert JobUnit.objects.filter(job=job, status=UnitStatus.CANCELLED).count() > 0
    # In-flight units may not write after the cancel; nothing new appears.
    assert Trajectory.objects.filter(job=job).count() <= cancelled_at + 2


def test_threads_waiting_for_the_window_lookup_hold_no_pooled_connection(celery_worker, llm_stub, settings):
    """A fresh worker's units all wait for the one thread that looks up the endpoint's context window.

    They used to wait holding their database connections; with a pool smaller than the threads, the
    looking-up thread then found none to record what it found, and timed out after 30 s.
    """
    from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
    from simia_web.synthesis.services import rollout_queue
    from tests.support.scripts import SHOP, tasks_answer

    if not settings.CELERY_BROKER_URL.startswith("redis://") or settings.DATABASES["default"]["ENGINE"].endswith(
        "sqlite3"
    ):
        pytest.skip("needs Redis and PostgreSQL (make test sets both)")
    domain = domain_ensure(name="shop")
    apis_store(domain=domain, apis=SHOP["apis"], state_schema=SHOP["state_schema"], initial_state=SHOP["initial_state"])
    tasks_store(domain=domain, tasks=tasks_answer(6)["tasks"][:6])
    llm_stub.lookup_latency = 0.5  # the window lookup's three requests take 1.5 s: every thread is waiting by then
    celery_worker(concurrency=6, SIMIA_DB_POOL_SIZE="2")
    job = rollout_queue(domain="shop", rollouts=1, tasks=6)
    wait_for(lambda: _job_done(job), timeout=150, message="the job to finish")
    assert job.status == JobStatus.SUCCEEDED, job.error
    units = JobUnit.objects.filter(job=job)
    assert sorted(units.values_list("status", "attempts")) == [(UnitStatus.DONE, 1)] * 6
