"""Retries, backoff and failure recording against real HTTP faults from the loopback endpoint."""

import pytest

from simia_web.llm.client import LLMError
from simia_web.llm.models import LLMCall
from tests.support.llm_stub import Reply, closed_port_url

from .conftest import ask


def _kinds():
    return list(LLMCall.objects.order_by("id").values_list("error_kind", flat=True))


@pytest.mark.parametrize(
    "fault, kind",
    [
        (Reply(status=429, error_message="slow down"), "rate_limited"),
        (Reply(status=500, error_message="boom"), "server_error"),
        (Reply(status=503, error_message="overloaded"), "server_error"),
        (Reply(raw_body="<html>bad gateway</html>"), "bad_response"),
        (Reply(raw_body='{"id": "x", "object": "chat.completion", "choices": []}'), "bad_response"),
    ],
)
def test_transient_failures_are_retried_and_each_attempt_recorded(stub, sleeps, fault, kind):
    stub.inject(fault, fault)
    reply = ask()
    assert reply.data == {"answer": 42}
    assert len(stub.requests) == 3
    assert _kinds() == [kind, kind, ""]
    assert [c.attempt for c in reply.calls] == [1, 2, 3]
    assert all(c.error for c in reply.calls[:2])
    assert len(sleeps) == 2  # backed off before each retry


def test_retry_after_header_sets_the_wait(stub, sleeps):
    stub.inject(Reply(status=429, error_message="slow down", headers={"Retry-After": "7"}))
    stub.inject(Reply(status=429, error_message="slow down", headers={"retry-after-ms": "250"}))
    assert ask().data == {"answer": 42}
    assert sleeps == [7.0, 0.25]


def test_retry_after_is_capped_and_dates_fall_back_to_backoff(stub, sleeps, settings):
    settings.SIMIA_LLM_BACKOFF_BASE = 0.5
    stub.inject(Reply(status=429, headers={"Retry-After": "3600"}))
    stub.inject(Reply(status=429, headers={"Retry-After": "Wed, 21 Oct 2099 07:28:00 GMT"}))
    assert ask().data == {"answer": 42}
    assert sleeps[0] == 30.0
    assert 0.5 <= sleeps[1] <= 1.5 * 2  # exponential backoff with jitter, second attempt


def test_backoff_grows_between_attempts(stub, sleeps, settings):
    settings.SIMIA_LLM_BACKOFF_BASE = 1.0
    settings.SIMIA_LLM_MAX_ATTEMPTS = 4
    stub.inject(*[Reply(status=500)] * 3)
    assert ask().data == {"answer": 42}
    first, second, third = sleeps
    assert 0.5 <= first <= 1.5 and 1.0 <= second <= 3.0 and 2.0 <= third <= 6.0


def test_timeouts_are_retried(stub):
    stub.profile.timeout_seconds = 0.3
    stub.profile.save()
    stub.inject(Reply(content={"answer": 1}, delay=1.5))
    reply = ask()
    assert reply.data == {"answer": 42}
    assert _kinds() == ["timeout", ""]
    assert "timed out" in reply.calls[0].error.lower()


def test_exhausted_retries_raise_the_last_reason(stub, settings):
    settings.SIMIA_LLM_MAX_ATTEMPTS = 3
    stub.inject(Reply(status=500), Reply(status=500), Reply(status=503, error_message="still overloaded"))
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "server_error"
    assert "3 attempts" in error.value.detail and "still overloaded" in error.value.detail
    assert _kinds() == ["server_error"] * 3
    assert len(stub.requests) == 3


def test_connection_refused_is_retried_then_reported(stub, settings):
    settings.SIMIA_LLM_MAX_ATTEMPTS = 2
    stub.profile.base_url = closed_port_url()
    stub.profile.save()
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "connection_error"
    assert _kinds() == ["connection_error"] * 2
    assert list(LLMCall.objects.values_list("attempt", flat=True).order_by("id")) == [1, 2]


@pytest.mark.parametrize("status, kind", [(401, "http_401"), (403, "http_403"), (404, "http_404")])
def test_client_errors_are_not_retried(stub, sleeps, status, kind):
    stub.inject(Reply(status=status, error_message="no such model or key"))
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == kind
    assert len(stub.requests) == 1 and _kinds() == [kind] and sleeps == []


def test_a_bad_request_unrelated_to_options_is_not_a_fallback(stub):
    stub.inject(Reply(status=400, error_message="Invalid value for 'temperature': must be at most 2."))
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "bad_request"
    assert len(stub.requests) == 1 and _kinds() == ["bad_request"]


def test_truncated_answer_is_a_failure_and_retried(stub):
    stub.inject(Reply(content='{"answer": 4', finish_reason="length"))
    reply = ask()
    assert reply.data == {"answer": 42}
    assert _kinds() == ["truncated", ""]
    truncated = reply.calls[0]
    assert truncated.response["finish_reason"] == "length" and "cut off" in truncated.error
    assert truncated.tokens_out > 0  # the tokens were spent all the same


def test_always_truncated_gives_up_with_that_reason(stub, settings):
    settings.SIMIA_LLM_MAX_ATTEMPTS = 2
    stub.responder = lambda request: Reply(content='{"answer"', finish_reason="length")
    with pytest.raises(LLMError) as error:
        ask()
    assert error.value.kind == "truncated"
    assert _kinds() == ["truncated", "truncated"]


def test_tokens_latency_cost_stage_and_job_are_recorded(stub):
    from simia_web.jobs.models import Job

    job = Job.objects.create(kind="synthesize")
    stub.inject(Reply(content={"answer": 42}, delay=0.05))
    reply = ask(stage="simulator", job_id=job.pk, prompt_version="sim-v3")
    call = LLMCall.objects.get(pk=reply.last_call.pk)
    assert call.stage == "simulator" and stub.requests[0].stage == "simulator"
    assert call.job_id == job.pk and call.prompt_version == "sim-v3"
    assert call.profile == stub.profile and call.model == "stub-model"
    assert call.tokens_in == 100 and call.tokens_out == len('{"answer": 42}') // 4
    assert call.latency_ms > 0
    # Prices are per million tokens: 1 in, 2 out.
    assert float(call.cost) == pytest.approx((100 * 1 + call.tokens_out * 2) / 1_000_000)
    assert call.request["messages"][-1]["content"] == "What is six times seven?"
    assert call.response["message"]["content"] == '{"answer": 42}'
    assert len(call.request_hash) == 64


def test_cost_is_empty_without_prices(stub):
    stub.profile.price_input_per_mtok = stub.profile.price_output_per_mtok = None
    stub.profile.save()
    assert ask().last_call.cost is None
