"""An endpoint's concurrency slots in one worker process.

Like a semaphore, a free slot goes to whichever thread asks first: on a busy worker the thread that
is running (holding the GIL) can use it at once, while a sleeping thread would first have to wake
and win the GIL back. Unlike threading.Semaphore, a woken waiter that loses that race keeps its
place instead of queueing again at the back (which left a few units waiting seconds for a slot),
and the waiter woken is the one of best rank, read when the slot frees: ranks can change while
threads wait (see llm.services.llm_slot_rank).
"""

import itertools
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

Rank = Callable[[], int]  # lower goes first; equal ranks go in order of arrival


def first_come() -> int:
    return 0


class Slots:
    def __init__(self, size: int):
        self._free = size
        self._lock = threading.Lock()
        # (rank, arrival, gate), at most one per thread: waiting, and woken but not yet running.
        self._waiting: list[tuple[Rank, int, threading.Lock]] = []
        self._woken: list[tuple[Rank, int, threading.Lock]] = []
        self._arrivals = itertools.count()

    def acquire(self, rank: Rank = first_come) -> None:
        """Take a slot, waiting for one if none is free (or a waiter of better rank is due to take it)."""
        with self._lock:
            mine = rank()
            if self._free and not any(w[0]() < mine for w in itertools.chain(self._waiting, self._woken)):
                self._free -= 1
                return
            waiter = (rank, next(self._arrivals), threading.Lock())
            waiter[2].acquire()
            self._waiting.append(waiter)
        while True:
            waiter[2].acquire()  # released by `release` when it wakes this waiter
            with self._lock:
                self._woken.remove(waiter)
                if self._free:
                    self._free -= 1
                    return
                self._waiting.append(waiter)  # a thread of the same rank took it first: wait again, same arrival

    def release(self) -> None:
        with self._lock:
            self._free += 1
            if self._waiting:
                best = min(self._waiting, key=lambda w: (w[0](), w[1]))
                self._waiting.remove(best)
                self._woken.append(best)
                best[2].release()

    def awaited(self) -> int:
        """Threads waiting for a slot, woken or not: each takes one as it frees."""
        with self._lock:
            return len(self._waiting) + len(self._woken)

    @contextmanager
    def taken(self, rank: Rank = first_come) -> Iterator[None]:
        self.acquire(rank)
        try:
            yield
        finally:
            self.release()
