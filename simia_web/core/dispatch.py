"""Queueing a Celery task by its registered name.

A task module imports the services whose work it runs; a service that queues a task (a job's start
queues its units, a webhook's failed attempt queues the next) would import that module back, a
cycle. Services name the task instead, and the task is its module's own: the apps' task modules are
imported once per process (as a worker does at its start), so options such as eager mode apply.
"""

import functools
from typing import Any

from celery import current_app
from celery.result import AsyncResult


@functools.cache
def _task_modules_imported() -> None:
    current_app.loader.import_default_modules()


def task_send(name: str, args: tuple = (), kwargs: dict[str, Any] | None = None, **options: Any) -> AsyncResult:
    """Queue the task registered as `name` ("simia_web.<app>.tasks.<function>") with these arguments."""
    _task_modules_imported()
    return current_app.signature(name, args=args, kwargs=kwargs or {}).apply_async(**options)


def task_producer():
    """A producer from the app's pool, to send many messages over one connection (`producer=` of task_send)."""
    return current_app.producer_or_acquire()
