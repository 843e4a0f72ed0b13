"""Endpoint limits shared through Redis by every process (here: several limiters, as processes would have),
and per process without Redis."""

import subprocess
import sys
import threading
import time
import uuid

import httpx2
import pytest

from simia_web.llm import limits
from simia_web.llm.limits import EndpointLimiter, EndpointLimits
from simia_web.llm.slots import first_come
from simia_web.llm.transport import LimitedTransport
from tests.conftest import ROOT
from tests.support.llm_stub import Reply


@pytest.fixture
def redis_url(settings):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    return settings.CELERY_BROKER_URL


def _limiter(name: str, redis_url: str = "", **kwargs) -> EndpointLimiter:
    return EndpointLimiter(name, EndpointLimits(**{"concurrency": 3, **kwargs}), redis_url)


def _hold_many(limiters: list[EndpointLimiter], per_limiter: int, work) -> None:
    def run(limiter):
        with limiter.held(first_come, tokens=lambda: 1) as outcome:
            work()
            outcome.succeeded = True

    threads = [threading.Thread(target=run, args=(lim,)) for lim in limiters for _ in range(per_limiter)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not any(thread.is_alive() for thread in threads)


def _leases_in_redis(redis_url: str, name: str, *, settled_within: float = 2.0) -> int:
    """The leases of `name` held in Redis once the spares nobody takes have gone back (a tenth of a request's time,
    at most limits._SPARE_HOLD_MAX)."""
    import redis

    client, deadline = redis.Redis.from_url(redis_url), time.monotonic() + settled_within
    while (held := client.zcard(f"simia:llm-limits:{name}:leases")) and time.monotonic() < deadline:
        time.sleep(0.01)
    return held


def _send_from_threads(limiters: list[EndpointLimiter], threads_each: int, url: str, requests_each: int = 1) -> list:
    """Each thread with its own client (as each worker thread has), all of a limiter's sharing its limits."""
    statuses = []

    def send(limiter):
        client = httpx2.Client(transport=LimitedTransport(limiter, lambda: first_come))
        for _ in range(requests_each):
            statuses.append(client.post(f"{url}/chat/completions", json={"model": "m", "messages": []}).status_code)
            if statuses[-1] == 429:
                threading.Event().wait(0.05)  # the wait before a retry (see client._complete)

    threads = [threading.Thread(target=send, args=(limiter,)) for limiter in limiters for _ in range(threads_each)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return statuses


def test_processes_sharing_redis_never_exceed_the_endpoints_concurrency_together(redis_url, llm_stub):
    """Two limiters of one profile (two worker processes) with 8 threads each, against the scripted server."""
    llm_stub.latency = 0.2
    llm_stub.responder = lambda request: Reply(content={})
    name = f"test-{uuid.uuid4().hex}"
    llm_stub.take_max_in_flight()
    statuses = _send_from_threads([_limiter(name, redis_url), _limiter(name, redis_url)], 8, llm_stub.url)
    assert statuses == [200] * 16
    assert llm_stub.take_max_in_flight() == 3


def test_without_redis_the_limit_holds_per_process():
    holding, most, lock = [0], [0], threading.Lock()

    def work():
        with lock:
            holding[0] += 1
            most[0] = max(most[0], holding[0])
        threading.Event().wait(0.01)
        with lock:
            holding[0] -= 1

    _hold_many([_limiter("local")], 12, work)
    assert most[0] == 3


_HOLD_IN_ANOTHER_PROCESS = """
import sys, time
import django
django.setup()
from simia_web.llm.limits import EndpointLimiter, EndpointLimits
from simia_web.llm.slots import first_come
limiter = EndpointLimiter(sys.argv[1], EndpointLimits(concurrency=1, lease_seconds=0.3), sys.argv[2])
with limiter.held(first_come, tokens=lambda: 1):
    print("held", flush=True)
    time.sleep(600)
"""


def test_a_lease_lives_while_its_process_does_and_expires_when_it_dies(redis_url, monkeypatch):
    """Another process holds the only lease far longer than a lease lasts, renewing it; killed, it frees it."""
    monkeypatch.setattr(limits, "_LEASE_POLL", 0.05)
    name = f"test-{uuid.uuid4().hex}"
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD_IN_ANOTHER_PROCESS, name, redis_url], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        survivor = _limiter(name, redis_url, concurrency=1, lease_seconds=0.3)
        got = threading.Event()

        def take():
            with survivor.held(first_come, tokens=lambda: 1):
                got.set()

        taker = threading.Thread(target=take, daemon=True)
        taker.start()
        assert not got.wait(2.0)  # seven lease lifetimes: the holder renewed it all along
    finally:
        holder.kill()
        holder.wait()
    assert got.wait(10)  # no renewal since the kill: it expired


def test_a_lease_is_held_through_a_request_longer_than_it_lasts(redis_url, monkeypatch):
    """Two limiters (two processes) whose leases last 0.2 s, each sending a request that takes 1 s."""
    monkeypatch.setattr(limits, "_LEASE_POLL", 0.05)
    name = f"test-{uuid.uuid4().hex}"
    holding, most, lock = [0], [0], threading.Lock()

    def work():
        with lock:
            holding[0] += 1
            most[0] = max(most[0], holding[0])
        threading.Event().wait(1.0)
        with lock:
            holding[0] -= 1

    processes = [_limiter(name, redis_url, concurrency=1, lease_seconds=0.2) for _ in range(2)]
    _hold_many(processes, 1, work)
    assert most[0] == 1


def _counted(limiter: EndpointLimiter, monkeypatch) -> list[str]:
    """The commands the limiter sends to Redis, as they are sent."""
    sent, send = [], limiter._redis.execute_command

    def counted(*args, **kwargs):
        sent.append(args[0])
        return send(*args, **kwargs)

    monkeypatch.setattr(limiter._redis, "execute_command", counted)
    return sent


def test_a_request_costs_two_redis_round_trips_taking_and_giving_back_its_lease(redis_url, monkeypatch):
    """One script call each (atomic on the server): worker CPU per LLM call stays flat as limits are shared. A lease
    no other request takes goes back on its own, a moment after its request."""
    name = f"test-{uuid.uuid4().hex}"
    limiter = _limiter(name, redis_url)
    sent = _counted(limiter, monkeypatch)
    with limiter.held(first_come, tokens=lambda: 1) as outcome:
        time.sleep(0.1)
        outcome.succeeded = True
    assert _leases_in_redis(redis_url, name) == 0
    assert sent == ["EVALSHA", "EVALSHA"]


def test_requests_sent_one_after_another_share_a_lease_then_give_it_back(redis_url, monkeypatch):
    """With no thread waiting, a lease still serves the process's next request sent in time: eight requests in a
    row from one thread take two leases, each given back after four requests."""
    name = f"test-{uuid.uuid4().hex}"
    limiter = _limiter(name, redis_url)
    sent = _counted(limiter, monkeypatch)
    # The next request follows at once; a busy machine may still pause this thread longer than the usual hold.
    monkeypatch.setattr(limits, "_SPARE_HOLD_MAX", 30.0)
    monkeypatch.setattr(limits, "_SPARE_HOLD_SHARE", 100.0)
    for _ in range(8):
        with limiter.held(first_come, tokens=lambda: 1) as outcome:
            time.sleep(0.05)
            outcome.succeeded = True
    assert sent == ["EVALSHA"] * 4
    assert _leases_in_redis(redis_url, name, settled_within=0) == 0


def test_a_429_sends_the_spare_leases_back_at_once(redis_url, monkeypatch):
    """A spare lease is not used through a cool-down this process started: it goes back to Redis."""
    name = f"test-{uuid.uuid4().hex}"
    limiter = _limiter(name, redis_url)
    monkeypatch.setattr(limits, "_SPARE_HOLD_MAX", 30.0)  # a spare would otherwise stay far longer than the test
    monkeypatch.setattr(limits, "_SPARE_HOLD_SHARE", 100.0)
    sending, answer = threading.Event(), threading.Event()

    def throttled_request():
        with limiter.held(first_come, tokens=lambda: 1) as throttled:
            sending.set()
            answer.wait(10)
            throttled.throttled, throttled.retry_after = True, 5.0

    thread = threading.Thread(target=throttled_request)
    thread.start()
    assert sending.wait(10)
    with limiter.held(first_come, tokens=lambda: 1) as outcome:  # under a second lease, kept spare after
        time.sleep(0.05)
        outcome.succeeded = True
    assert len(limiter._spare) == 1
    answer.set()
    thread.join(10)
    assert _leases_in_redis(redis_url, name) == 0
    assert limiter._spare == []


def test_a_lease_passes_to_threads_waiting_for_a_slot_then_goes_back_to_redis(redis_url, monkeypatch):
    """Eight threads for one slot: each lease serves four requests in a row (two script calls for four requests
    instead of eight), one at a time, and every lease is back in Redis at the end."""

    name = f"test-{uuid.uuid4().hex}"
    limiter = _limiter(name, redis_url, concurrency=1)
    sent = _counted(limiter, monkeypatch)
    lock, holding, most = threading.Lock(), [0], [0]

    def work():
        with lock:
            holding[0] += 1
            most[0] = max(most[0], holding[0])
        time.sleep(0.05)  # the other threads queue for the slot meanwhile
        with lock:
            holding[0] -= 1

    _hold_many([limiter], 8, work)
    assert most[0] == 1
    assert sent == ["EVALSHA"] * 4  # two leases, each taken and given back once
    assert _leases_in_redis(redis_url, name, settled_within=0) == 0


def test_threads_waiting_for_a_lease_take_one_passed_on_and_the_cap_holds(redis_url):
    """A cap of three, two leases held by another process: of this one's three threads with a slot, one holds the
    last lease, one listens for leases given back in Redis and one waits for the lease to be passed on. All six
    requests go through, one at a time, and every lease is back in Redis at the end."""

    name = f"test-{uuid.uuid4().hex}"
    other, release_other, other_holds = _limiter(name, redis_url), threading.Event(), threading.Semaphore(0)

    def hold_in_the_other_process():
        with other.held(first_come, tokens=lambda: 1):
            other_holds.release()
            release_other.wait(30)

    holders = [threading.Thread(target=hold_in_the_other_process) for _ in range(2)]
    for thread in holders:
        thread.start()
    for _ in holders:
        assert other_holds.acquire(timeout=10)
    lock, holding, most = threading.Lock(), [0], [0]

    def work():
        with lock:
            holding[0] += 1
            most[0] = max(most[0], holding[0])
        time.sleep(0.05)
        with lock:
            holding[0] -= 1

    limiter, given_back = _limiter(name, redis_url), []
    release = limiter._release
    limiter._release = lambda **kwargs: given_back.append(1) or release(**kwargs)
    _hold_many([limiter], 6, work)
    release_other.set()
    for thread in holders:
        thread.join(timeout=10)
    assert most[0] == 1
    assert _leases_in_redis(redis_url, name) == 0
    assert len(given_back) < 6  # some requests went out under a lease passed on


def test_every_success_a_lease_served_raises_a_lowered_cap(redis_url):
    import redis

    name = f"test-{uuid.uuid4().hex}"
    limiter = _limiter(name, redis_url, concurrency=8)
    client = redis.Redis.from_url(redis_url)
    client.set(f"simia:llm-limits:{name}:cap", "2")
    lease = limiter._lease_take()
    lease.uses, lease.successes = 3, 2  # served three requests before this one (one failed), passed on
    outcome = limits.Outcome()
    outcome.succeeded = True
    limiter._lease_give_back(lease, outcome)  # its last use: back to Redis, with three successes
    assert float(client.get(f"simia:llm-limits:{name}:cap")) == pytest.approx(2 + 1 / 2 + 1 / 2.5 + 1 / 2.9)


def test_a_429_starts_one_cool_down_and_halves_the_cap_which_successes_raise_again(redis_url):
    import redis

    name = f"test-{uuid.uuid4().hex}"
    limiter = _limiter(name, redis_url, concurrency=8)
    client = redis.Redis.from_url(redis_url)
    cap_key, cool_down_key = (f"simia:llm-limits:{name}:{key}" for key in ("cap", "cool-down"))
    for _ in range(3):  # a storm of 429s halves the cap once
        with limiter.held(first_come, tokens=lambda: 1) as outcome:
            outcome.throttled, outcome.retry_after = True, 5.0
    assert float(client.get(cap_key)) == 4.0
    assert 4000 < client.pttl(cool_down_key) <= 5000
    client.delete(cool_down_key)
    for _ in range(4):
        with limiter.held(first_come, tokens=lambda: 1) as outcome:
            outcome.succeeded = True
    assert _leases_in_redis(redis_url, name) == 0  # the successes count as the leases go back
    assert 4.9 < float(client.get(cap_key)) < 5.0  # 1/4 + 1/4.25 + ...: about one more per cap successes


def test_other_threads_wait_out_a_cool_down_and_the_throttled_thread_retries_at_once(monkeypatch):
    limiter = _limiter("local-cool-down")
    with limiter.held(first_come, tokens=lambda: 1) as outcome:
        outcome.throttled, outcome.retry_after = True, 3.0
    own_waits = _record_waits(monkeypatch)
    with limiter.held(first_come, tokens=lambda: 1):  # the thread that got the 429 waited before its retry
        pass
    assert own_waits == []
    monkeypatch.undo()
    waited = []

    def send_meanwhile():
        with pytest.raises(Waited), limiter.held(first_come, tokens=lambda: 1):
            pass
        waited.append(True)

    other = threading.Thread(target=send_meanwhile)
    other_waits = _record_waits(monkeypatch, other)
    other.start()
    other.join(timeout=5)
    assert waited and len(other_waits) == 1 and 2.5 < other_waits[0] <= 3.0


class Waited(Exception):
    pass


def _record_waits(monkeypatch, thread: threading.Thread | None = None) -> list[float]:
    """time.sleep in this thread (or `thread`) records the wait and gives up (a rate window would make it
    wait again); the scripted server's threads sleep as usual."""
    waits, real_sleep, waiter = [], time.sleep, thread or threading.current_thread()

    def sleep(seconds):
        if threading.current_thread() is not waiter:
            return real_sleep(seconds)
        waits.append(seconds)
        raise Waited()

    monkeypatch.setattr(limits.time, "sleep", sleep)
    return waits


@pytest.mark.parametrize("rates, tokens", [({"requests_per_minute": 2}, 1), ({"tokens_per_minute": 1000}, 400)])
def test_requests_and_tokens_per_minute_are_waited_for(monkeypatch, rates, tokens):
    waits = _record_waits(monkeypatch)
    limiter = _limiter(f"rates-{uuid.uuid4().hex}", **rates)
    for _ in range(2):
        with limiter.held(first_come, tokens=lambda: tokens):
            pass
    with pytest.raises(Waited), limiter.held(first_come, tokens=lambda: tokens):
        pass
    assert len(waits) == 1 and 0 < waits[0] <= 1.0


def test_a_request_larger_than_the_token_limit_is_still_sent(monkeypatch):
    _record_waits(monkeypatch)
    limiter = _limiter(f"rates-{uuid.uuid4().hex}", tokens_per_minute=100)
    with limiter.held(first_come, tokens=lambda: 5000):
        pass


def test_the_transport_reports_429s_with_their_retry_after(llm_stub, monkeypatch):
    llm_stub.inject(Reply(status=429, error_message="slow down", headers={"retry-after-ms": "1500"}))
    limiter = _limiter("local-transport")
    http = httpx2.Client(transport=LimitedTransport(limiter, lambda: first_come))
    assert http.post(f"{llm_stub.url}/chat/completions", json={"model": "m", "messages": []}).status_code == 429
    waited = []

    def send_after_the_429():
        with pytest.raises(Waited), limiter.held(first_come, tokens=lambda: 1):
            pass
        waited.append(True)

    other = threading.Thread(target=send_after_the_429)
    waits = _record_waits(monkeypatch, other)
    other.start()
    other.join(timeout=5)
    assert waited and len(waits) == 1 and 1.0 < waits[0] <= 1.5


def test_an_endpoint_that_throttles_above_its_capacity_is_given_about_that_capacity(redis_url, llm_stub):
    """It answers 429 while more than 3 requests are in flight; two processes allowed 12 in all back off to about
    what it takes (halving once per cool-down, adding 1 / cap per success) and most requests get through."""
    llm_stub.latency = 0.05
    llm_stub.responder = lambda request: (
        Reply(status=429, error_message="slow down", headers={"retry-after-ms": "50"})
        if llm_stub.in_flight > 3
        else Reply(content={})
    )
    name = f"test-{uuid.uuid4().hex}"
    limiters = [_limiter(name, redis_url, concurrency=12), _limiter(name, redis_url, concurrency=12)]
    statuses = _send_from_threads(limiters, 6, llm_stub.url, requests_each=10)
    # Sent 12 at a time without backing off, about two in three were throttled here; converging, about one in five.
    assert statuses.count(429) < len(statuses) * 0.4


@pytest.mark.integration
def test_two_workers_keep_the_cap_through_requests_slower_than_a_lease(redis_url, celery_worker, llm_stub):
    """Leases last 1 s; the endpoint's first answers take 4 s, more than the profile's timeout (1.5 s) and a lease
    together, yet within the 6 s a slow endpoint's request may wait (4x the profile's timeout, at its learned rate).
    Two worker processes run a rollout each against a cap of one request: the server never sees two at once."""
    from dataclasses import replace

    from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
    from simia_web.jobs.models import JobStatus, JobUnit
    from simia_web.synthesis.services import rollout_queue
    from tests.conftest import wait_for
    from tests.support.scripts import SHOP, pipeline_responder, tasks_answer

    domain = domain_ensure(name="shop")
    apis_store(domain=domain, apis=SHOP["apis"], state_schema=SHOP["state_schema"], initial_state=SHOP["initial_state"])
    tasks_store(domain=domain, tasks=tasks_answer(2)["tasks"][:2])
    profile = llm_stub.profile
    profile.max_concurrency, profile.timeout_seconds, profile.tokens_per_second = 1, 1.5, 1.0
    profile.context_window = 8192
    profile.save()
    scripted, slow_left = pipeline_responder(), [4]

    def slow_at_first(request):
        reply = scripted(request)
        slow_left[0] -= 1
        return replace(reply, delay=4.0) if slow_left[0] >= 0 else reply

    llm_stub.responder = slow_at_first
    workers = {"CELERY_WORKER_PREFETCH_MULTIPLIER": "1", "SIMIA_LLM_LEASE_SECONDS": "1"}
    celery_worker(concurrency=1, **workers)
    celery_worker(concurrency=1, **workers)
    llm_stub.take_max_in_flight()
    job = rollout_queue(domain="shop", rollouts=1, tasks=2)

    def holders():
        running = JobUnit.objects.filter(job=job, stage="rollout", finished_at=None).exclude(lease_holder="")
        return len(set(running.values_list("lease_holder", flat=True))) == 2

    wait_for(holders, timeout=60, interval=0.1, message="both workers running a rollout")
    wait_for(lambda: job.refresh_from_db() or not job.is_active, timeout=120, message="the job to finish")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert slow_left[0] < 0  # every slow answer was asked for
    assert llm_stub.take_max_in_flight() == 1
