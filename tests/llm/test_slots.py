"""Concurrency slots: first come first served for running threads, waiters woken by rank, no lost places."""

import sys
import threading
import time

import pytest

from simia_web.llm import services
from simia_web.llm.models import LLMCall
from simia_web.llm.slots import Slots


@pytest.fixture
def no_thread_switches():
    """While the test thread runs Python code, no other thread does (until it blocks)."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(5.0)
    yield
    sys.setswitchinterval(interval)


def _wait_until(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.001)


def _queue_waiters(slots: Slots, names, got: list, ranks=None) -> list[threading.Thread]:
    """Start one thread per name, each waiting for a slot in turn, and note the order they get one."""
    threads = []
    for name in names:

        def take(name=name):
            with slots.taken((lambda: ranks[name]()) if ranks else (lambda: 0)):
                got.append(name)

        thread = threading.Thread(target=take, daemon=True)
        thread.start()
        waiting = len(threads) + 1
        _wait_until(lambda waiting=waiting: len(slots._waiting) == waiting)
        threads.append(thread)
    return threads


def test_free_slots_are_taken_at_once_and_bound_the_holders():
    slots = Slots(2)
    slots.acquire()
    slots.acquire()
    got = []
    (waiter,) = _queue_waiters(slots, ["late"], got)
    assert got == []  # both slots are held
    slots.release()
    waiter.join(timeout=5)
    assert got == ["late"]
    slots.release()
    with slots.taken():  # the waiter gave its slot back
        pass


def test_waiters_get_slots_in_order_of_arrival(no_thread_switches):
    slots = Slots(1)
    slots.acquire()
    got = []
    threads = _queue_waiters(slots, ["w1", "w2", "w3"], got)
    slots.release()  # wakes w1; this thread is still running and takes the slot first
    slots.acquire()
    _wait_until(lambda: len(slots._waiting) == 3)  # w1 found no slot and waits again
    assert got == []
    slots.release()
    for thread in threads:
        thread.join(timeout=5)
    # w1, passed over once, kept its place instead of going behind w2 and w3.
    assert got == ["w1", "w2", "w3"]


def test_waiters_are_woken_by_the_rank_they_have_when_a_slot_frees():
    slots = Slots(1)
    slots.acquire()
    ranks = {"a": lambda: 5, "b": lambda: 5, "c": lambda: 1}
    got = []
    threads = _queue_waiters(slots, ["a", "b", "c"], got, ranks)
    ranks["b"] = lambda: 0  # b's job started finishing while it waited
    slots.release()
    for thread in threads:
        thread.join(timeout=5)
    assert got == ["b", "c", "a"]


def test_a_thread_of_worse_rank_leaves_a_free_slot_to_the_woken_waiter_it_is_due_to():
    slots = Slots(1)
    slots.acquire()
    gate = threading.Lock()
    gate.acquire()
    slots._waiting.append((lambda: 0, 0, gate))  # a waiter of rank 0 ...
    slots.release()  # ... woken by this release, and not running yet (it never will: nobody waits on gate)
    assert slots._free == 1 and len(slots._woken) == 1
    late = threading.Thread(target=lambda: slots.acquire(lambda: 3), daemon=True)
    late.start()
    late.join(timeout=0.2)
    assert late.is_alive()  # it waits instead of taking the slot the woken waiter is due
    slots.acquire(lambda: 0)  # a thread of the same rank may take it: it is running, the waiter is not
    assert slots._free == 0


def test_rank_is_first_come_outside_a_finishing_job():
    assert services.llm_slot_rank()() == 0
    with services.llm_calls_held(job_id=41) as calls:
        rank = services.llm_slot_rank()
        calls.extend([LLMCall(), LLMCall()])
        assert rank() == 0


def test_a_finishing_jobs_units_go_first_fewest_calls_first():
    with services.llm_calls_held(job_id=42) as calls:
        calls.extend([LLMCall(), LLMCall()])
        two_calls = services.llm_slot_rank()
    with services.llm_calls_held(job_id=42):
        no_calls = services.llm_slot_rank()
    with services.llm_calls_held(job_id=43):
        other_job = services.llm_slot_rank()
    services.llm_job_finishing(42)
    assert no_calls() < two_calls() < other_job() == 0


def test_many_threads_of_changing_ranks_never_exceed_the_slots_and_all_finish():
    import random

    slots, holding, most, lock = Slots(3), [0], [0], threading.Lock()
    ranks = {}

    def work(n):
        for _ in range(50):
            ranks[n] = random.choice([0, 0, 1, 2])  # read again whenever a slot frees
            with slots.taken(lambda: ranks[n]):
                with lock:
                    holding[0] += 1
                    most[0] = max(most[0], holding[0])
                time.sleep(random.random() / 2000)
                with lock:
                    holding[0] -= 1

    threads = [threading.Thread(target=work, args=(n,), daemon=True) for n in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)
    assert most[0] == 3 and holding[0] == 0
    assert slots._free == 3 and not slots._waiting and not slots._woken
