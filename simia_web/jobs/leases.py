"""The units a worker process holds, and the heartbeat that keeps their leases.

A process holds a unit from the moment the broker hands it the unit's message (it may wait in the
threads' queue behind other units; Celery's task_received) until its task ends, and while it runs it.
One thread per process renews the leases of all of them in one UPDATE a beat
(SIMIA_UNIT_HEARTBEAT_SECONDS); a lease lasts three beats, so a worker that dies (SIGKILL, a lost
machine) lets its units go within three beats, while a worker that is alive keeps them however long
they wait or run. Nothing is written per unit or per LLM call for this.

In worker processes the same thread also takes the cluster's watchdog turn (jobs.services.jobs_heal).
After an outage that thread stays quiet for a lease's length: other workers' leases may have run out
while they could not renew them, and they get that long to do it before a unit counts as unheld.
"""

import functools
import logging
import os
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from django.conf import settings
from django.db import Error as DatabaseError

from simia_web.core.db import db_connection_check, db_connection_give_back
from simia_web.core.outages import connections_reset, is_outage

from . import unit_rows

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_received: Counter[int] = Counter()  # units whose messages this process took and has not finished
_running: set[int] = set()
_beating: threading.Thread | None = None


@functools.cache
def _hostname() -> str:
    return socket.gethostname()


def lease_holder() -> str:
    """This process, as a unit's lease names it."""
    return f"{_hostname()}:{os.getpid()}"


def lease_seconds() -> float:
    return 3 * settings.SIMIA_UNIT_HEARTBEAT_SECONDS


def unit_received(unit_id: int) -> None:
    with _lock:
        _received[unit_id] += 1


def unit_let_go(unit_id: int) -> None:
    with _lock:
        if _received[unit_id] > 1:
            _received[unit_id] -= 1
        else:
            del _received[unit_id]


@contextmanager
def unit_running(unit_id: int) -> Iterator[bool]:
    """Note the unit as running here for the block; yields False if another thread here already runs it."""
    with _lock:
        first = unit_id not in _running
        _running.add(unit_id)
    try:
        yield first
    finally:
        if first:
            with _lock:
                _running.discard(unit_id)


def held_units() -> list[int]:
    with _lock:
        return list(_running.union(_received))


def heartbeat_start(*, watch: Callable[[], object] | None = None) -> None:
    """Start this worker process's heartbeat thread (once); with `watch`, the thread calls it every beat."""
    global _beating
    with _lock:
        if _beating is None:
            _beating = threading.Thread(target=_beat_forever, args=(watch,), name="unit-leases", daemon=True)
            _beating.start()


def _beat_forever(watch: Callable[[], object] | None) -> None:
    quiet_until = 0.0
    while True:
        began = time.monotonic()
        if not beat(watch=watch if began >= quiet_until else None):
            quiet_until = time.monotonic() + lease_seconds()
        time.sleep(max(0.0, settings.SIMIA_UNIT_HEARTBEAT_SECONDS - (time.monotonic() - began)))


def beat(*, watch: Callable[[], object] | None = None) -> bool:
    """Renew this process's leases, then call `watch`; False when the database was out of reach."""
    try:
        db_connection_check()
        if held := held_units():
            unit_rows.units_lease_renew(held, holder=lease_holder(), lease_seconds=lease_seconds())
        if watch is not None:
            watch()
    except Exception as exc:
        if not is_outage(exc):
            logger.exception("unit heartbeat failed")
            return True
        logger.warning("unit heartbeat: a server is out of reach (%s)", exc)
        connections_reset()
        return not isinstance(exc, DatabaseError)  # the broker's outage leaves the leases as they were
    finally:
        db_connection_give_back()
    return True
