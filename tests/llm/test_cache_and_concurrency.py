"""The response cache and the per-profile concurrency limit."""

import threading

import pytest
from django.db import connection

from simia_web.llm.models import LLMCall
from tests.support.llm_stub import Reply

from .conftest import ask


@pytest.fixture
def cached(stub):
    stub.profile.cache_enabled = True
    stub.profile.save()
    return stub


def test_identical_request_is_served_from_the_cache(cached):
    first = ask(prompt_version="v1")
    second = ask(prompt_version="v1")
    assert second.data == first.data == {"answer": 42}
    assert len(cached.requests) == 1  # nothing reached the endpoint the second time
    hit = LLMCall.objects.get(pk=second.last_call.pk)
    assert hit.cache_hit and hit.ok and hit.cost == 0 and hit.tokens_in == 0
    assert hit.request_hash == first.last_call.request_hash
    assert hit.stage == "judge" and hit.profile == cached.profile


def test_a_different_salt_or_prompt_misses(cached):
    ask(cache_salt="rollout-1")
    ask(cache_salt="rollout-2")
    ask(cache_salt="rollout-1", messages=[{"role": "user", "content": "And seven times six?"}])
    assert len(cached.requests) == 3
    assert not LLMCall.objects.filter(cache_hit=True).exists()
    ask(cache_salt="rollout-2")
    assert len(cached.requests) == 3 and LLMCall.objects.filter(cache_hit=True).count() == 1


def test_failed_and_invalid_answers_are_not_cached(cached):
    cached.inject(Reply(status=500), Reply(content="garbage"))
    assert ask().data == {"answer": 42}  # 500, retried: garbage, repaired: 42
    assert len(cached.requests) == 3
    # Neither the 500 nor the garbage answer to the original request is served again.
    assert ask().data == {"answer": 42}
    assert len(cached.requests) == 4 and not LLMCall.objects.filter(cache_hit=True).exists()
    # That valid answer is.
    assert ask().data == {"answer": 42}
    assert len(cached.requests) == 4 and LLMCall.objects.filter(cache_hit=True).count() == 1


def test_cache_off_always_asks(stub):
    ask()
    ask()
    assert len(stub.requests) == 2 and not LLMCall.objects.filter(cache_hit=True).exists()


def test_max_concurrency_bounds_requests_in_flight(stub, transactional_db):
    stub.profile.max_concurrency = 4
    stub.profile.save()
    stub.latency = 0.05  # long enough for requests to overlap
    results, errors = [], []
    start = threading.Barrier(20)

    def worker(n):
        try:
            start.wait()
            results.append(ask(messages=[{"role": "user", "content": f"question {n}"}]).data)
        except Exception as exc:  # reported below; a thread must not die silently
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=worker, args=(n,)) for n in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert results == [{"answer": 42}] * 20
    assert 1 <= stub.max_in_flight <= 4
    assert LLMCall.objects.filter(error="").count() == 20
