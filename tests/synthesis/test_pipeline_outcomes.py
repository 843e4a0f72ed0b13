"""What a job and its trajectories say when parts of the pipeline give nothing usable."""

import socket
import urllib.request

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from simia_web.catalog.models import Domain, Task
from simia_web.catalog.validation import api_problems, state_problems
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Trajectory, TrajectoryStatus
from simia_web.formats.rules import argument_violations
from simia_web.jobs.models import Job, JobStatus, UnitStatus
from simia_web.jobs.selectors import job_failure_cause
from simia_web.llm.models import EndpointProfile, LLMCall
from simia_web.synthesis.services import rollout_queue, synthesis_queue
from tests.support.llm_stub import Reply
from tests.support.scripts import APIS, SHOP

CANCEL = {"name": "cancel_order", "arguments": {"order_id": "W1", "reason": "wrong size"}}


def test_the_judge_sees_the_initial_state_and_each_change_to_it(eager, llm_stub):
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    evidence = llm_stub.stage_requests("judge")[0].user_payload()
    assert evidence["initial_state"] == SHOP["initial_state"]
    assert evidence["state_changes"] == {
        "3": {"patch": [{"op": "replace", "path": "/orders/W1/status", "value": "cancelled"}]}
    }


def test_an_agent_that_never_answers_fails_its_unit_and_so_the_job(eager, llm_stub):
    llm_stub.inject(Reply(status=400, error_message="model not found"), stage="agent")
    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED
    assert job.error == (
        "bad_request: Error code: 400 - model not found (1 of 1 failures; all 1 units of its rollout stage failed)"
    )
    unit = job.units.get(stage="rollout")
    assert unit.status == UnitStatus.FAILED and "bad_request" in unit.error
    assert not Trajectory.objects.filter(job=job).exists()  # a system prompt and a task are not a conversation


def test_an_agent_that_stops_answering_leaves_a_trajectory_with_the_reason(eager, llm_stub):
    llm_stub.inject(Reply(tool_calls=[CANCEL]), Reply(status=400, error_message="context too long"), stage="agent")
    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED  # its only trajectory was cut short: nothing usable was made
    assert job.error == (
        "agent: bad_request: Error code: 400 - context too long "
        "(1 of 1 failures; all 1 units of its rollout stage failed or ended in an error)"
    )
    trajectory = Trajectory.objects.get(job=job)
    assert (trajectory.status, trajectory.termination_reason) == (TrajectoryStatus.RULES_FAILED, "llm_error")
    failure = trajectory.violations.get(code="llm_error")
    assert failure.message_index == 3 and "context too long" in failure.detail
    assert "error" not in trajectory.steps  # steps are keyed by message index only
    assert job.summary["rejection_reasons"]["llm_error"] == 1


def test_a_domain_whose_world_state_is_invalid_is_kept_but_not_used(eager, llm_stub):
    # Synthesis derives a state's schema from its records and edits refuse an invalid state: such a state comes
    # from an older synthesis, which wrote schemas of its own.
    broken = {"orders": {"W1": {"status": "lost"}}}
    schema = SHOP["state_schema"] | {"required": ["orders", "users"]}
    domain = Domain.objects.create(
        name="shop", state_schema=schema, initial_state=broken, state_errors=state_problems(schema, broken)
    )
    assert domain.state_problems and "users" in domain.state_problems[0]
    llm_stub.inject(Reply(content={**APIS, "collections": [], "records": []}), stage="api_synthesis")
    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    job.refresh_from_db()
    domain.refresh_from_db()
    assert domain.initial_state == broken  # kept with its errors
    unit = job.units.get(stage="task_synthesis")
    assert unit.status == UnitStatus.FAILED and "has an invalid world state" in unit.error
    assert not llm_stub.stage_requests("task_synthesis")  # no LLM call for a domain it cannot use
    assert job.status == JobStatus.FAILED
    Task.objects.create(domain=domain, instruction="Cancel W1.")
    with pytest.raises(ValidationFailed, match="has an invalid world state"):
        rollout_queue(domain="shop", rollouts=1)


def test_an_answer_without_records_does_not_replace_a_world_state(eager, llm_stub):
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    llm_stub.inject(Reply(content={"apis": [], "collections": [], "records": []}), stage="api_synthesis")
    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    job.refresh_from_db()
    domain = Domain.objects.get(name="shop")
    assert domain.initial_state == SHOP["initial_state"] and domain.state_problems == []
    assert "a synthesized world state was not used: it has no records" in domain.state_errors
    assert job.units.get(stage="task_synthesis").status == UnitStatus.DONE  # the domain is still usable


def test_a_rollout_job_needs_valid_tasks(db):
    Domain.objects.create(name="empty")
    with pytest.raises(ValidationFailed, match="no valid task"):
        rollout_queue(domain="empty", rollouts=1)


def test_a_ref_must_resolve_within_its_schema_and_is_never_fetched(monkeypatch):
    fetched = []
    monkeypatch.setattr(urllib.request, "urlopen", lambda *args, **kwargs: fetched.append(args) or 1 / 0)
    api = {
        "name": "get_order",
        "kind": "read",
        "parameters": {"type": "object", "properties": {"order": {"$ref": "#/$defs/order"}}},
    }
    assert any("does not resolve" in p for p in api_problems(api))
    api["parameters"]["$defs"] = {"order": {"type": "string", "default": {"$ref": "not a schema"}}}
    assert api_problems(api) == []
    scoped = {"$id": "https://example.com/order", "$defs": {"id": {"type": "string"}}, "$ref": "#/$defs/id"}
    api["parameters"]["properties"]["order"] = {
        "$id": "https://example.com/wrapper",
        "$ref": "order",
        "$defs": {"x": scoped},
    }
    assert api_problems(api) == []  # resolved against the nearest $id, as validation does

    remote = {"$ref": "https://example.com/order.json"}
    assert any("does not resolve" in p for p in api_problems({**api, "parameters": remote}))
    # An imported tool with such a schema is a rule violation, and nothing was fetched.
    [violation] = argument_violations(remote, {"order": "W1"}, 2, "get_order")
    assert violation.code == "tool_schema_invalid"
    assert fetched == []


# ---- outcomes that name the cause ----------------------------------------------------------------------------


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_an_unreachable_endpoint_fails_the_first_stage_and_the_error_says_where(eager, llm_stub):
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    EndpointProfile.objects.filter(pk=llm_stub.profile.pk).update(base_url=url)
    job = synthesis_queue(domains=["shop", "bank"], apis=3, tasks=1, rollouts=1)
    job.refresh_from_db()
    assert (job.status, job.stage) == (JobStatus.FAILED, "api_synthesis")  # not "the rollout stage had nothing"
    assert job.error == (
        f"connection_error: could not reach {url} — check OPENAI_BASE_URL or the endpoint profile "
        "(2 of 2 failures; all 2 units of its api_synthesis stage failed)"
    )
    assert not job.units.exclude(stage="api_synthesis").exists()  # no stage after one where every unit failed


def test_the_cause_shows_the_endpoint_without_its_credentials(db):
    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    profile = EndpointProfile.objects.create(name="p", model="m", base_url="https://user:pw@llm.example:8443/v1?key=k")
    for i, kind in enumerate(("timeout", "http_401", "http_401")):
        LLMCall.objects.create(
            stage="agent", model="m", request_hash="h", request={}, job=job, profile=profile, error="x", error_kind=kind
        )
        job.units.create(stage="rollout", key=str(i), status=UnitStatus.FAILED, error=f"LLMError: {kind}: answer {i}")
    assert job_failure_cause(job) == (
        "http_401: https://llm.example:8443/v1 refused the API key — check the variable named by the profile's "
        "api_key_env",
        "2 of 3 failures",
    )


def test_the_most_frequent_failure_is_the_cause(db):
    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    traced = "UnusableDomain: no APIs\nTraceback (most recent call last):\n  File"
    for i, error in enumerate([traced, "UnusableDomain: no APIs", "KeyError: 1"]):
        job.units.create(stage="rollout", key=str(i), status=UnitStatus.FAILED, error=error)
    assert job_failure_cause(job) == ("UnusableDomain: no APIs", "2 of 3 failures")


def test_trajectories_left_unjudged_finish_the_job_with_errors(eager, llm_stub, capsys):
    llm_stub.inject(Reply(status=400, error_message="judge model missing"), stage="judge")
    with pytest.raises(CommandError, match="no domain named"):
        call_command("queue", "rollout", "--param", "domain=shop", "--wait")
    params = ("--param", "domains=shop", "--param", "apis=3", "--param", "tasks=1")
    call_command("queue", "synthesize", *params, "--wait")  # exits normally
    job = Job.objects.get(kind="synthesize")
    assert job.status == JobStatus.FINISHED_WITH_ERRORS
    assert job.error == (
        "bad_request: Error code: 400 - judge model missing (1 of 1 failures; "
        "1 trajectories were left unjudged because the judge failed)"
    )
    assert Trajectory.objects.get(job=job).status == TrajectoryStatus.GENERATED
    assert f"job {job.pk} finished with errors: bad_request" in capsys.readouterr().err


def test_a_stage_partly_failed_finishes_the_job_with_errors(eager, llm_stub):
    llm_stub.inject(Reply(status=400, error_message="bad schema"), stage="api_synthesis")
    job = synthesis_queue(domains=["shop", "bank"], apis=3, tasks=1, rollouts=1)
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED_WITH_ERRORS
    # The domain without APIs fails its task unit too; the other domain's rollout is made.
    assert job.error.startswith("bad_request: Error code: 400 - bad schema (1 of 2 failures; 2 of 5 units failed)")
    assert job.summary["units"] == {"done": 3, "failed": 2}


def test_the_cause_keeps_a_server_answer_that_spans_lines_without_the_traceback(db):
    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    answer = "server_error: Error code: 500 - 1 validation error:\n  {'msg': \"Input should be 'text'\"}"
    error = f"LLMError: {answer}\nTraceback (most recent call last):\n  File"
    job.units.create(stage="rollout", key="u", status=UnitStatus.FAILED, error=error)
    assert job_failure_cause(job) == (
        "server_error: Error code: 500 - 1 validation error: {'msg': \"Input should be 'text'\"}",
        "1 of 1 failures",
    )
