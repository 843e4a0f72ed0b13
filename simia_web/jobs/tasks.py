"""The job engine's Celery tasks (start a job, run a unit, the watchdog's probe) and the worker signals that hold
units' leases: thin, each calls a service. Greenlet pools are refused at start."""

from pathlib import Path

from celery import shared_task
from celery.signals import celeryd_init, task_postrun, task_received, task_revoked, worker_process_init, worker_ready
from django.conf import settings

from simia_web.core.outages import through_outages

from . import leases, services
from .broker_folder import outbox_watch

# No Celery retries: a task never fails for an outage (the services wait it out), and a unit's own error
# is written on the unit.


@shared_task(acks_late=True, ignore_result=True)
def job_start(job_id: int) -> None:
    through_outages(lambda: services.job_start(job_id=job_id), what=f"job {job_id}'s start")


@shared_task(acks_late=True, ignore_result=True)
def unit_execute(unit_id: int, last_of_stage: bool = False) -> None:
    services.unit_execute(unit_id=unit_id, last_of_stage=last_of_stage)


@shared_task(ignore_result=True)
def queue_probe(sent_at: float) -> None:
    """The watchdog's probe, come through the queue behind every message sent before it (see jobs_heal)."""
    through_outages(lambda: services.queue_probe_seen(sent_at=sent_at), what="the watchdog's probe")


# Pools whose monkey-patching turns threads into greenlets: the database driver, the lease heartbeat and the
# endpoint limits' threads are not written for them.
UNSUPPORTED_POOLS = ("gevent", "eventlet")


class UnsupportedPool(SystemExit):
    """Ends `celery worker` at start, its message on stderr (an exception a signal receiver raises is only logged)."""


@celeryd_init.connect
def _refuse_unsupported_pools(options=None, **_kwargs):
    pool = (options or {}).get("pool_cls")
    name = getattr(pool, "__module__", str(pool or "")).rpartition(".")[2]
    if name in UNSUPPORTED_POOLS:
        raise UnsupportedPool(
            f"The {name} pool is not supported: start the worker with the default prefork pool, or --pool threads "
            "(many LLM calls at once) or --pool solo. See docs/deployment.md."
        )


# A unit's message, once this worker has it, is held here until its task ends: the heartbeat keeps its lease.


@task_received.connect
def _on_task_received(request=None, **_kwargs):
    if request is not None and request.name == unit_execute.name and request.args:
        leases.unit_received(request.args[0])


@task_postrun.connect
def _on_task_postrun(task=None, args=None, **_kwargs):
    if task is not None and task.name == unit_execute.name and args:
        leases.unit_let_go(args[0])


@task_revoked.connect
def _on_task_revoked(request=None, **_kwargs):
    if request is not None and request.name == unit_execute.name and request.args:
        leases.unit_let_go(request.args[0])


@worker_process_init.connect
def _on_pool_process_init(**_kwargs):
    leases.pool_child_start()


@worker_ready.connect
def _on_worker_ready(**_kwargs):
    if settings.CELERY_BROKER_URL.startswith("filesystem://"):
        options = settings.CELERY_BROKER_TRANSPORT_OPTIONS
        outbox_watch(Path(str(options["data_folder_out"])), Path(str(options["data_folder_in"])))
    leases.heartbeat_start()
    leases.watchdog_start(services.jobs_heal)
