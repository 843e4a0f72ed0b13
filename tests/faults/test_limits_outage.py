"""The endpoint limits' Redis out of reach: a request waits unsent (no LLM call, no attempt spent) and goes
once Redis answers; a lease it could not give back is given back later. Against a Redis of the test's own."""

import shutil
import tempfile
import threading
import uuid
from pathlib import Path

import pytest
import redis

from simia_web.llm import limits
from simia_web.llm.limits import EndpointLimiter, EndpointLimits
from simia_web.llm.slots import first_come

from .cluster import Redis

pytestmark = pytest.mark.integration


@pytest.fixture
def own_redis(monkeypatch):
    if not shutil.which("redis-server"):
        pytest.skip("redis-server is not installed")
    monkeypatch.setattr("simia_web.core.outages._LONGEST_PAUSE", 0.2)
    root = Path(tempfile.mkdtemp(prefix="simia-limits-"))
    server = Redis(root)
    server.start()
    yield server
    server.kill()
    shutil.rmtree(root, ignore_errors=True)


def _limiter(server: Redis) -> EndpointLimiter:
    return EndpointLimiter(f"test-{uuid.uuid4().hex}", EndpointLimits(concurrency=1), server.url())


def _send(limiter: EndpointLimiter, sent: threading.Event) -> None:
    with limiter.held(first_come, tokens=lambda: 1) as outcome:
        sent.set()
        outcome.succeeded = True


def test_a_request_waits_for_the_limits_redis_and_goes_once_it_is_back(own_redis):
    limiter = _limiter(own_redis)
    _send(limiter, threading.Event())
    own_redis.kill()
    sent = threading.Event()
    sender = threading.Thread(target=_send, args=(limiter, sent))
    sender.start()
    assert not sent.wait(1.5)  # no lease, no request: waiting, not failing
    assert sender.is_alive()
    own_redis.start()  # empty: a Redis restarted without persistence
    assert sent.wait(30)
    sender.join(30)
    assert not sender.is_alive()


def test_a_lease_redis_could_not_take_back_is_given_back_when_it_answers_again(own_redis, monkeypatch):
    limiter = _limiter(own_redis)
    release = limiter._release
    failures = [redis.ConnectionError("Connection reset by peer")]

    def release_once_unreachable(**kwargs):
        if failures:
            raise failures.pop()
        return release(**kwargs)

    monkeypatch.setattr(limiter, "_release", release_once_unreachable)
    monkeypatch.setattr(limits, "_LEASE_USES", 1)  # each lease goes back after its request, not kept spare
    _send(limiter, threading.Event())  # the answer goes to its caller; the lease stays in Redis for now
    leases = limiter._keys("leases")[0]
    assert limiter._redis.zcard(leases) == 1
    sent = threading.Event()
    _send(limiter, sent)  # with a concurrency of 1, only the late give-back lets this one through
    assert sent.is_set() and limiter._redis.zcard(leases) == 0
