"""The units a worker process holds, and the heartbeat that keeps their leases.

A process holds a unit from the moment the broker hands it the unit's message (it may wait in the
threads' queue behind other units; Celery's task_received) until its task ends, and while it runs it.
One thread per process renews the leases of all of them in one UPDATE a beat
(SIMIA_UNIT_HEARTBEAT_SECONDS); a lease lasts three beats, so a worker that dies (SIGKILL, a lost
machine) lets its units go within three beats, while a worker that is alive keeps them however long
they wait or run. Nothing is written per unit or per LLM call for this.

A long unit says how far it has got with unit_progress (kept here, in memory): its own thread may hold a
transaction for the whole run (an export reads through one), in which its own writes would show only at the
end. The heartbeat writes what changed since its last beat on its own connection, in one statement for all
of the process's units, after renewing their leases.

Every Celery pool works the same way. With threads or solo, the process that takes a message runs its unit.
With prefork, the parent takes messages and leases their units, and a child process runs each one: the child's
claim takes the lease over from its parent (unit_rows.unit_claim_for_run), its own heartbeat renews it while it
runs, and the parent lets go of units ended or run elsewhere (it sees no task end: Celery's task_postrun fires in
the child). A forked child starts with none of its parent's units, threads or lock.

Each worker process also runs a watchdog thread, which takes the cluster's watchdog turn each beat
(jobs.services.jobs_heal); apart from the heartbeat, so that a broker slow to answer never delays a
renewal. After a database outage (failures, or waits for a connection longer than a beat) the
watchdog stays quiet for as long again plus a lease: other workers' leases may have run out while
they could not renew them, and they get that long to reconnect and renew before a unit counts as
unheld.
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
from django.db import connection

from simia_web.core.db import db_connection_check, db_connection_give_back
from simia_web.core.outages import connections_reset, is_outage

from . import unit_rows

logger = logging.getLogger(__name__)

_lock = threading.Lock()
_received: Counter[int] = Counter()  # units whose messages this process took and has not finished
_running: set[int] = set()
_threads: dict[str, threading.Thread] = {}
_progress: dict[int, dict] = {}  # the latest progress each unit running here reported
_progress_unwritten: set[int] = set()  # units whose latest progress the heartbeat has yet to write
_parent = ""  # in a prefork pool's child: the parent process, as a lease names it


def _forked() -> None:
    """A forked process holds nothing of its parent's: units, threads (they do not survive a fork), a lock another
    thread may have held at the fork."""
    global _lock, _parent
    _lock = threading.Lock()
    _received.clear()
    _running.clear()
    _threads.clear()
    _progress.clear()
    _progress_unwritten.clear()
    _parent = ""


os.register_at_fork(after_in_child=_forked)


@functools.cache
def _hostname() -> str:
    return socket.gethostname()


def lease_holder() -> str:
    """This process, as a unit's lease names it."""
    return f"{_hostname()}:{os.getpid()}"


def pool_child_start() -> None:
    """In a prefork pool's child process: claim units whose leases the parent took, and renew them while they run."""
    global _parent
    _parent = f"{_hostname()}:{os.getppid()}"
    heartbeat_start()


def parent_holder() -> str:
    """The pool's parent process when this is a prefork child ("" otherwise): a lease it holds passes to this one."""
    return _parent


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
            _received.pop(unit_id, None)  # let go already: the heartbeat saw it ended or run elsewhere


def _units_gone_let_go() -> None:
    """Let go of units this process took messages for and does not run, once they ended or another process runs
    them: a prefork parent learns of no task end, and its children's claims take its leases over."""
    with _lock:
        waiting = [unit_id for unit_id in _received if unit_id not in _running]
    if not waiting:
        return
    gone = unit_rows.units_gone_elsewhere(waiting, holder=lease_holder())
    with _lock:
        for unit_id in gone:
            if unit_id not in _running:
                _received.pop(unit_id, None)


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
                _progress.pop(unit_id, None)
                _progress_unwritten.discard(unit_id)


def unit_progress(unit_id: int, done: int, total: int, *, what: str, doing: str = "") -> None:
    """Say how far a unit running in this process has got: `done` of `total` `what` ("records written or left
    out"; a total of 0: not known), while `doing` ("Building snapshot 12"; without it the page names the unit's stage
    and key). Only the latest is kept; the heartbeat writes it."""
    progress = {"done": done, "total": total, "what": what, "doing": doing}
    with _lock:
        if unit_id in _running and _progress.get(unit_id) != progress:
            _progress[unit_id] = progress
            _progress_unwritten.add(unit_id)


def _progress_write() -> None:
    """Write the progress reported since the last beat; kept to be written again when the write fails."""
    with _lock:
        changed = {unit_id: _progress[unit_id] for unit_id in _progress_unwritten}
        _progress_unwritten.clear()
    if not changed:
        return
    try:
        unit_rows.units_progress_write(changed, holder=lease_holder())
    except Exception:
        with _lock:  # the latest progress of each unit still running here
            _progress_unwritten.update(unit_id for unit_id in changed if unit_id in _progress)
        raise


def held_units() -> list[int]:
    with _lock:
        return list(_running.union(_received))


def heartbeat_start() -> None:
    """Start this worker process's heartbeat thread (once)."""
    _thread_start("unit-leases", _beat_forever)


def watchdog_start(look: Callable[[], object]) -> None:
    """Start this worker process's watchdog thread (once): `look` every beat, except during an outage of
    the database and for as long again plus a lease after it (see the module's notes)."""
    _thread_start("job-watchdog", _watch_forever, look)


def _thread_start(name: str, target, *args) -> None:
    with _lock:
        if name not in _threads:
            _threads[name] = threading.Thread(target=target, args=args, name=name, daemon=True)
            _threads[name].start()


def _beat_forever() -> None:
    while True:
        began = time.monotonic()
        beat()
        time.sleep(max(0.0, settings.SIMIA_UNIT_HEARTBEAT_SECONDS - (time.monotonic() - began)))


def beat() -> None:
    """Renew the leases of the units this process holds, then write the progress its units reported: one
    statement for all of them, one more when some unit's progress changed, and one more when it holds units it
    does not run (to let go of those ended or run elsewhere)."""
    try:
        db_connection_check()
        _units_gone_let_go()
        if held := held_units():
            unit_rows.units_lease_renew(held, holder=lease_holder(), lease_seconds=lease_seconds())
        _progress_write()
    except Exception as exc:
        if not is_outage(exc):
            logger.exception("unit heartbeat failed")
            return
        logger.warning("unit heartbeat: the database is out of reach (%s)", exc)
        connections_reset()
    finally:
        db_connection_give_back()


def _watch_forever(look: Callable[[], object]) -> None:
    away_since: float | None = None  # when this outage of the database began, while it lasts
    quiet_until = 0.0
    while True:
        began = time.monotonic()
        if not watch(look, quiet=away_since is not None or began < quiet_until):
            away_since = away_since or began
        elif away_since is not None:
            # A worker whose connection pool backs off between reconnections (doubling its wait) is back up to
            # the outage's length after the database; it then renews its leases within a beat.
            now = time.monotonic()
            quiet_until, away_since = now + (now - away_since) + lease_seconds(), None
        time.sleep(max(0.0, settings.SIMIA_UNIT_HEARTBEAT_SECONDS - (time.monotonic() - began)))


def watch(look: Callable[[], object], *, quiet: bool = False) -> bool:
    """Call `look` unless `quiet`; False when the database was out of reach, or slow to give a connection.

    For leases to run out while their workers live, the database must have been away for two beats, which
    every watchdog then sees: a failure, or a wait for a connection longer than a beat.
    """
    began = time.monotonic()
    try:
        db_connection_check()
        connection.ensure_connection()
        if time.monotonic() - began > settings.SIMIA_UNIT_HEARTBEAT_SECONDS:
            return False
        if not quiet:
            look()
    except Exception as exc:
        if not is_outage(exc):
            logger.exception("job watchdog failed")
            return True
        logger.warning("job watchdog: a server is out of reach (%s)", exc)
        connections_reset()
        return not isinstance(exc, DatabaseError)  # a broker outage leaves the leases as they were
    finally:
        db_connection_give_back()
    return True
