"""The adaptive concurrency limit (llm/adaptive.py): its step, the same in Python and in the Lua that Redis runs, and
the limit it finds against the scripted server's one-slot mode, with Redis (the cluster's) and without (the
process's). Convergence is counted in requests, never in seconds."""

import json
import random
import threading
import uuid

import httpx2
import pytest

from simia_web.llm import adaptive, limits
from simia_web.llm.adaptive import Sample, allowed, next_limit
from simia_web.llm.limits import EndpointLimiter, EndpointLimits, Outcome
from simia_web.llm.slots import first_come
from simia_web.llm.transport import LimitedTransport
from tests.support.llm_stub import Reply

SECONDS_PER_TOKEN = 0.0004  # the one-slot server reads a prompt of 500 tokens in 0.2 s


@pytest.fixture
def redis_url(settings):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    return settings.CELERY_BROKER_URL


@pytest.fixture(params=["redis", "process"])
def where(request):
    """Where the limit is kept: in Redis for the cluster, or in the process (the embedded default)."""
    return request.param


def _limiter(where: str, request, ceiling: int = 8) -> EndpointLimiter:
    if "llm_stub" in request.fixturenames:
        request.getfixturevalue("llm_stub").responder = lambda _request: Reply(content={})
    url = request.getfixturevalue("redis_url") if where == "redis" else ""
    return EndpointLimiter(f"test-{uuid.uuid4().hex}", EndpointLimits(concurrency=ceiling), url)


def _prompt(tokens: int) -> list[dict]:
    return [{"role": "user", "content": "w" * (4 * tokens)}]


class _Senders:
    """Threads sending to the scripted server through one limiter (one worker process), each with its own client,
    recording every request's outcome and the limit after it."""

    def __init__(self, limiter: EndpointLimiter, url: str, *, timeout: float):
        self.limiter, self.url, self.timeout = limiter, url, timeout
        self.outcomes: list[str] = []
        self.limits: list[float] = []
        self._lock = threading.Lock()
        self._rng = random.Random(7)

    def send(self, threads: int, requests: int) -> None:
        left = [requests]

        def run():
            client = httpx2.Client(transport=LimitedTransport(self.limiter, lambda: first_come), timeout=self.timeout)
            while True:
                with self._lock:
                    if left[0] <= 0:
                        return
                    left[0] -= 1
                    tokens = self._rng.randint(300, 700)
                try:
                    response = client.post(
                        f"{self.url}/chat/completions", json={"model": "m", "messages": _prompt(tokens)}
                    )
                    assert response.status_code == 200
                    outcome = "ok"
                except httpx2.ReadTimeout:
                    outcome = "timeout"
                with self._lock:
                    self.outcomes.append(outcome)
                    self.limits.append(self.limiter.adaptive_state()["limit"])
                if outcome == "timeout":
                    threading.Event().wait(0.05)  # the client's backoff before a retry

        workers = [threading.Thread(target=run) for _ in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(timeout=120)
        assert not any(worker.is_alive() for worker in workers)


def test_the_step_falls_with_latency_that_rises_with_the_number_in_flight_and_grows_while_it_is_flat():
    alone = Sample(seconds=1.0, sent=4000, received=0, in_flight=1)
    limit, noload = next_limit(8.0, 0.0, 8, alone)
    assert (limit, noload) == (8.0, 0.25)
    queued = Sample(seconds=4.0, sent=4000, received=0, in_flight=8)  # four times as long with eight in flight
    limit, noload = next_limit(8.0, noload, 8, queued)
    assert limit == 4.0  # halved at most, in one step
    limit, _ = next_limit(2.0, 0.25, 8, Sample(seconds=2.0, sent=4000, received=0, in_flight=2))
    assert limit == pytest.approx(1.5, rel=0.03)  # twice as long with a second in flight
    bigger = Sample(seconds=2.0, sent=8000, received=0, in_flight=2)  # twice the work in twice the time: flat
    assert next_limit(2.0, 0.25, 8, bigger)[0] == pytest.approx(2.25)
    assert next_limit(8.0, 0.25, 8, Sample(seconds=9, sent=4000, received=0, in_flight=8, dropped=True))[0] == 4.0
    assert next_limit(8.0, 0.25, 8, Sample(seconds=9, sent=4000, received=0, in_flight=1))[0] == 8.0  # alone
    assert next_limit(4.0, 0.25, 8, Sample(seconds=1, sent=4000, received=0, in_flight=1))[0] == 4.0  # app-limited
    # Two in flight of the eight allowed, each waiting for the other: down to what the two showed.
    assert next_limit(8.0, 0.25, 8, Sample(seconds=2, sent=4000, received=0, in_flight=2))[0] == pytest.approx(
        1.5, rel=0.03
    )


def test_redis_takes_the_same_steps_as_the_process(redis_url):
    rng = random.Random(3)
    samples = [
        Sample(seconds=rng.uniform(0.1, 3), sent=rng.randint(500, 9000), received=rng.randint(0, 900),
               in_flight=rng.randint(1, 8), dropped=rng.random() < 0.1)
        for _ in range(40)
    ]  # fmt: skip
    limiter = EndpointLimiter(f"test-{uuid.uuid4().hex}", EndpointLimits(concurrency=8), redis_url)
    local = adaptive.LocalAdaptive(8)
    for batch in (samples[:1], samples[1:4], samples[4:20], samples[20:]):
        lease = limiter._lease_take()
        lease.samples = list(batch)
        limiter._lease_release(lease, "ok", 0)
        for sample in batch:
            local.sample(sample)
        state = limiter.adaptive_state()
        assert state["limit"] == pytest.approx(local.limit, rel=1e-5)
        assert state["noload"] == pytest.approx(local.noload, rel=1e-6)
    changes = [point["limit"] for point in limiter.adaptive_state()["history"]]
    assert [allowed(limit) for limit in changes] == [allowed(limit) for _, limit in local.history]


def test_against_a_one_slot_server_the_limit_falls_from_eight_to_one_and_no_request_times_out_after(
    where, request, llm_stub
):
    """Eight threads against a server that works on one request at a time, each taking time in proportion to its
    prompt. They start eight at once (the ceiling), so the first requests wait at the server for the others and time
    out; within a few requests the limit is down to one, and from then on no request times out."""
    llm_stub.set_slots(1)
    llm_stub.seconds_per_prompt_token = SECONDS_PER_TOKEN
    limiter = _limiter(where, request)
    senders = _Senders(limiter, llm_stub.url, timeout=3 * 700 * SECONDS_PER_TOKEN)
    senders.send(threads=8, requests=40)
    first_at_one = next(i for i, limit in enumerate(senders.limits) if allowed(limit) == 1)
    assert first_at_one < 12
    # Those sent before it fell may still be answered late, and the server still works through the requests their
    # clients gave up on (a timed-out request stays in its queue): on a busy machine that drains over a few more.
    steady = senders.outcomes[first_at_one + 12 :]
    assert len(steady) >= 10 and steady.count("timeout") == 0
    assert max(allowed(limit) for limit in senders.limits[first_at_one:]) <= 2
    history = limiter.adaptive_state()["history"]
    assert history and allowed(history[-1]["limit"]) <= 2
    assert len(history) <= adaptive.HISTORY_KEPT


def test_the_limit_rises_again_when_the_server_gains_slots(where, request, llm_stub):
    llm_stub.set_slots(1)
    llm_stub.seconds_per_prompt_token = SECONDS_PER_TOKEN / 4
    limiter = _limiter(where, request)
    limiter.adaptive_start(1)
    senders = _Senders(limiter, llm_stub.url, timeout=30)
    senders.send(threads=8, requests=12)
    assert max(allowed(limit) for limit in senders.limits) <= 2
    llm_stub.set_slots(6)
    llm_stub.take_worked_most()
    senders.send(threads=8, requests=40)
    assert allowed(senders.limits[-1]) >= 4
    assert llm_stub.take_worked_most() >= 4


def test_a_request_given_up_on_keeps_its_place_until_the_server_is_done_with_it(where, request, llm_stub):
    """The server keeps writing the answer to a request whose client gave up (as llama-cpp-python does): the next
    request waits for it in our queue instead of joining it at the server."""
    llm_stub.set_slots(1)
    llm_stub.seconds_per_prompt_token = SECONDS_PER_TOKEN
    limiter = _limiter(where, request, ceiling=2)
    client = httpx2.Client(transport=LimitedTransport(limiter, lambda: first_come), timeout=30)
    client.post(f"{llm_stub.url}/chat/completions", json={"model": "m", "messages": _prompt(500)})  # measured
    llm_stub.take_max_in_flight()
    impatient = httpx2.Client(transport=LimitedTransport(limiter, lambda: first_come), timeout=0.05)
    with pytest.raises(httpx2.ReadTimeout):
        impatient.post(f"{llm_stub.url}/chat/completions", json={"model": "m", "messages": _prompt(500)})
    assert allowed(limiter.adaptive_state()["limit"]) == 1  # the timeout halved it
    client.post(f"{llm_stub.url}/chat/completions", json={"model": "m", "messages": _prompt(500)})
    assert llm_stub.take_max_in_flight() == 1  # never two at the server
    assert llm_stub.abandoned == 1


def test_time_waiting_for_the_limit_is_not_part_of_a_requests_timeout(where, request, llm_stub):
    """One slot of ours, held by another request for longer than this one's timeout: this one waits for it, then is
    sent and answered."""
    llm_stub.latency = 0.05
    limiter = _limiter(where, request, ceiling=1)
    holding, release = threading.Event(), threading.Event()

    def hold():
        with limiter.held(first_come, tokens=lambda: 1) as outcome:
            holding.set()
            release.wait(10)
            outcome.succeeded = True

    holder = threading.Thread(target=hold)
    holder.start()
    assert holding.wait(10)
    threading.Timer(0.6, release.set).start()
    client = httpx2.Client(transport=LimitedTransport(limiter, lambda: first_come), timeout=0.3)
    response = client.post(f"{llm_stub.url}/chat/completions", json={"model": "m", "messages": _prompt(10)})
    assert response.status_code == 200
    holder.join(10)


def test_spare_leases_are_kept_only_while_the_endpoint_is_given_its_whole_ceiling(redis_url, monkeypatch):
    monkeypatch.setattr(limits, "_SPARE_HOLD_MAX", 30.0)
    monkeypatch.setattr(limits, "_SPARE_HOLD_SHARE", 100.0)
    limiter = EndpointLimiter(f"test-{uuid.uuid4().hex}", EndpointLimits(concurrency=4), redis_url)
    with limiter.held(first_come, tokens=lambda: 1) as outcome:
        outcome.succeeded = True
    assert len(limiter._spare) == 1
    limiter.adaptive_start(2)
    with limiter.held(first_come, tokens=lambda: 1) as outcome:
        outcome.succeeded = True
    assert limiter._spare == []


def test_a_probe_starts_the_limit_at_the_servers_slots_and_the_history_shows_it(where, request):
    limiter = _limiter(where, request)
    limiter.adaptive_start(1, noload=0.01)
    state = limiter.adaptive_state()
    assert (state["limit"], state["ceiling"], state["noload"]) == (1.0, 8, 0.01)
    assert [point["limit"] for point in state["history"]] == [1.0]
    outcome = Outcome()
    assert limiter.expected_seconds(4000) == pytest.approx(0.04)
    assert outcome.measured is None


def test_the_limit_and_its_history_are_shown_and_in_metrics(where, request, llm_stub, client, settings):
    from django.template.loader import render_to_string
    from prometheus_client.parser import text_string_to_metric_families

    from simia_web.llm.limits import endpoint_limiter
    from simia_web.llm.selectors import adaptive_limits

    settings.SIMIA_LLM_LIMITS_REDIS_URL = request.getfixturevalue("redis_url") if where == "redis" else ""
    settings.SIMIA_METRICS_TOKEN, settings.SIMIA_METRICS_ALLOWED_IPS = "scrape-token-0123456789", []
    llm_stub.profile.max_concurrency = 8
    llm_stub.profile.save()
    endpoint_limiter(llm_stub.profile).adaptive_start(2, noload=0.02)
    shown = adaptive_limits()["stub"]
    assert (shown["allowed"], shown["ceiling"], shown["known"]) == (2, 8, True)
    assert [change["allowed"] for change in shown["history"]] == [2]
    html = render_to_string("llm/_adaptive_limit.html", {"adaptive": shown})
    assert "<strong>2</strong> of at most 8" in html and "<polyline" in html and 'id="adaptive-limit-history"' in html
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer scrape-token-0123456789")
    samples = {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(response.content.decode())
        for sample in family.samples
    }
    assert samples[("simia_llm_concurrency_limit", (("profile", "stub"),))] == 2
    assert samples[("simia_llm_concurrency_ceiling", (("profile", "stub"),))] == 8


def test_redis_out_of_reach_leaves_the_limit_unknown_not_the_page_broken(db, settings, llm_stub):
    from django.template.loader import render_to_string

    from simia_web.llm.selectors import adaptive_limits

    settings.SIMIA_LLM_LIMITS_REDIS_URL = "redis://127.0.0.1:9/0"
    shown = adaptive_limits()["stub"]
    assert shown["known"] is False and shown["ceiling"] == 32
    assert "did not answer" in render_to_string("llm/_adaptive_limit.html", {"adaptive": shown})


def test_check_endpoint_says_the_pace_of_a_one_slot_server(llm_stub):
    from io import StringIO

    from django.core.management import call_command

    from simia_web.llm.limits import endpoint_limiter

    llm_stub.responder = lambda _request: Reply(content="OK")
    llm_stub.set_slots(1)
    llm_stub.seconds_per_prompt_token = 0.001  # a prompt of 260 tokens: about a quarter of a second
    output = StringIO()
    call_command("check_endpoint", stdout=output)
    text = output.getvalue()
    assert "pace: 1 request at a time (measured);" in text, text
    assert "prompt tokens/s; " in text and "a 4k-token prompt takes about" in text
    assert "a small synthesis (1 domain, 3 APIs, 2 tasks, 1 rollout: about" in text
    llm_stub.profile.refresh_from_db()
    pace = llm_stub.profile.capabilities["concurrency"]
    assert pace["slots"] == 1 and 100 < pace["prompt_tokens_per_second"] < 2000
    assert endpoint_limiter(llm_stub.profile).adaptive_state()["limit"] == 1.0  # the limit starts there


def test_a_call_that_timed_out_is_retried_only_once_the_server_is_done_with_it(stub, settings):
    """A one-slot server takes about 0.5 s for the prompt; the profile's timeout is 0.3 s. The client gives up, backs
    off until the server should be done with the abandoned request, then retries with a longer timeout: the server
    never has two requests at once, and the abandoned one was finished for nobody."""
    from tests.llm.conftest import ask

    settings.SIMIA_LLM_BACKOFF_BASE = 0.01
    stub.profile.timeout_seconds = 0.3
    stub.profile.save()
    stub.set_slots(1)
    stub.seconds_per_prompt_token = 0.5 / (len(json.dumps(_asked_messages())) / 4)
    stub.take_max_in_flight()
    reply = ask()
    assert [call.error_kind for call in reply.calls] == ["timeout", ""]
    assert reply.data == {"answer": 42}
    assert stub.take_max_in_flight() == 1
    assert stub.abandoned == 1


def _asked_messages() -> list[dict]:
    """The messages `ask` sends (its question with the schema in the system prompt, as the stub's structured mode)."""
    return [{"role": "user", "content": "What is six times seven?"}]


def test_an_answer_too_fast_to_have_queued_never_lowers_the_limit_and_a_slow_one_does():
    from simia_web.llm.adaptive import QUEUE_EVIDENCE_SECONDS, Sample, next_limit

    yardstick = Sample(seconds=0.2, sent=20_000, received=0, in_flight=1).per_unit
    fast = Sample(seconds=QUEUE_EVIDENCE_SECONDS / 2, sent=10, received=0, in_flight=2)  # many times the yardstick
    slow = Sample(seconds=2.0, sent=20_000, received=0, in_flight=2)
    assert fast.per_unit > 3 * yardstick and fast.encoded()[2] == 2
    assert next_limit(8.0, yardstick, 8, fast)[0] == 8.0
    assert next_limit(8.0, yardstick, 8, slow)[0] < 8.0
