"""Every Celery pool an operator may start a worker with finishes every job, each unit run exactly once: the default
prefork (at two and four processes), solo and threads, on the embedded default and on PostgreSQL + Redis. A job has
more units than the worker has processes, so units wait for a free process while their lease is held."""

import sqlite3
from pathlib import Path

import pytest

from simia_web.curation.models import Trajectory
from simia_web.jobs.models import JobStatus, JobUnit, UnitStatus
from simia_web.synthesis.services import synthesis_queue
from tests.conftest import manage, wait_for

pytestmark = pytest.mark.integration

# (pool, concurrency): None is no --pool option at all, Celery's default (prefork, one process per CPU).
POOLS = [(None, None), ("prefork", 2), ("prefork", 4), ("solo", 1), ("threads", 4)]
POOL_IDS = ["default", "prefork-2", "prefork-4", "solo", "threads-4"]
# Each LLM answer takes this long: units outlast the heartbeat's first beats while others wait for a process.
LATENCY = 0.2
BEATS = {"SIMIA_UNIT_HEARTBEAT_SECONDS": "1"}
ROLLOUTS = ("--param", "domains=shop", "--param", "apis=3", "--param", "tasks=3", "--param", "rollouts=2")


@pytest.mark.parametrize(("pool", "concurrency"), POOLS, ids=POOL_IDS)
def test_every_pool_finishes_every_unit_once_on_the_embedded_default(embedded_env, pool, concurrency):
    env = embedded_env["env"]
    embedded_env["stub"].latency = LATENCY
    embedded_env["start_worker"](concurrency=concurrency, pool=pool, **BEATS)
    result = manage(env, "queue", "synthesize", *ROLLOUTS, "--wait", timeout=240)
    assert result.returncode == 0, result.stderr[-3000:] + result.stdout[-3000:]
    with sqlite3.connect(Path(env["SIMIA_VAR_DIR"]) / "simia.sqlite3") as db:
        units = db.execute("SELECT stage, status, attempts FROM jobs_jobunit ORDER BY stage").fetchall()
        trajectories = db.execute("SELECT COUNT(*), COUNT(DISTINCT unit_id) FROM curation_trajectory").fetchone()
    rollouts = [unit for unit in units if unit[0] == "rollout"]
    assert len(rollouts) == 6 and len(units) > 6
    assert {(status, attempts) for _stage, status, attempts in units} == {(UnitStatus.DONE.value, 1)}
    assert trajectories == (6, 6)


# Celery's default on this 2-core machine is prefork-2: the embedded default runs it with no option at all.
@pytest.mark.parametrize(("pool", "concurrency"), POOLS[1:], ids=POOL_IDS[1:])
def test_every_pool_finishes_every_unit_once_on_postgres_and_redis(
    celery_worker, llm_stub, settings, pool, concurrency
):
    if not settings.CELERY_BROKER_URL.startswith("redis://") or settings.DATABASES["default"]["ENGINE"].endswith(
        "sqlite3"
    ):
        pytest.skip("needs Redis and PostgreSQL (make test sets both)")
    llm_stub.latency = LATENCY
    celery_worker(concurrency=concurrency, pool=pool, **BEATS)
    job = synthesis_queue(domains=["shop"], apis=3, tasks=3, rollouts=2)

    def ended():
        job.refresh_from_db()
        return not job.is_active

    wait_for(ended, timeout=180, message=f"the job to finish on a {pool or 'default'} pool")
    assert job.status == JobStatus.SUCCEEDED, job.error
    units = JobUnit.objects.filter(job=job)
    assert units.filter(stage="rollout").count() == 6 and units.count() > 6
    assert set(units.values_list("status", "attempts")) == {(UnitStatus.DONE, 1)}
    trajectories = Trajectory.objects.filter(job=job)
    assert trajectories.count() == trajectories.values("unit_id").distinct().count() == 6


def test_a_wedged_pool_process_loses_its_units_to_another_worker_within_the_stall_setting(
    celery_worker, llm_stub, settings
):
    """A prefork worker whose one process stops (SIGSTOP: alive, running nothing) while its parent renews the leases
    of the messages it took: the watchdog takes those back after SIMIA_UNIT_STALL_SECONDS and another worker runs
    them, each unit once."""
    import psutil

    from simia_web.operations.selectors import metric_counts

    if not settings.CELERY_BROKER_URL.startswith("redis://") or settings.DATABASES["default"]["ENGINE"].endswith(
        "sqlite3"
    ):
        pytest.skip("needs Redis and PostgreSQL (make test sets both)")
    llm_stub.latency = LATENCY
    stall = {**BEATS, "SIMIA_UNIT_STALL_SECONDS": "4"}
    wedged = celery_worker(concurrency=1, pool="prefork", **stall)
    job = synthesis_queue(domains=["shop"], apis=3, tasks=4, rollouts=2)
    wait_for(lambda: Trajectory.objects.filter(job=job).exists(), timeout=120, message="a first trajectory")
    for child in psutil.Process(wedged.pid).children():
        child.suspend()
    try:
        celery_worker(concurrency=4, pool="threads", **stall)

        def ended():
            job.refresh_from_db()
            return not job.is_active

        wait_for(ended, timeout=90, message="the job to finish on the other worker")
        assert job.status == JobStatus.SUCCEEDED, job.error
        rollouts = JobUnit.objects.filter(job=job, stage="rollout")
        assert rollouts.count() == rollouts.filter(status=UnitStatus.DONE).count() == 8
        trajectories = Trajectory.objects.filter(job=job)
        assert trajectories.count() == trajectories.values("unit_id").distinct().count() == 8
        taken_back = sum(n for _labels, n in metric_counts().get("job_unit_leases_taken_back", []))
        assert taken_back >= 1
    finally:
        wedged.kill()


@pytest.mark.parametrize("name", ["gevent", "eventlet"])
def test_greenlet_pools_are_refused_at_start_with_what_to_use(name):
    from celery.signals import celeryd_init

    from simia_web.jobs.tasks import UnsupportedPool

    pool = type("TaskPool", (), {"__module__": f"celery.concurrency.{name}"})
    with pytest.raises(UnsupportedPool, match=f"The {name} pool is not supported.*--pool threads"):
        celeryd_init.send(sender="worker@test", instance=None, conf=None, options={"pool_cls": pool})
    for supported in ("prefork", "threads", "solo"):
        pool = type("TaskPool", (), {"__module__": f"celery.concurrency.{supported}"})
        celeryd_init.send(sender="worker@test", instance=None, conf=None, options={"pool_cls": pool})
