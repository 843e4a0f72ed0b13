"""The domain-first pipeline end to end, executed in-process against the scripted LLM server."""

import json
import re

import pytest
from django.db import transaction
from rest_framework.test import APIClient

from simia_web.catalog.models import Api, Domain, Task, TaskStatus
from simia_web.curation.models import Trajectory, TrajectoryStatus
from simia_web.jobs.models import JobStatus
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import LLMCall, Stage
from simia_web.simulation.simulator import answer_schema
from simia_web.synthesis.services import rollout_queue, synthesis_queue
from tests.support.llm_stub import Reply
from tests.support.scripts import SHOP, pipeline_responder

CANCEL_CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "cancel_order", "arguments": '{"order_id": "W1", "reason": "wrong size"}'},
}


def test_synthesis_job_runs_every_stage(eager, llm_stub):
    job = synthesis_queue(domains=["shop"], apis=3, tasks=2, rollouts=2)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    domain = Domain.objects.get(name="shop")
    assert set(Api.objects.filter(domain=domain, valid=True).values_list("name", flat=True)) == {
        "get_order",
        "cancel_order",
    }
    bad = Api.objects.get(domain=domain, valid=False)
    assert any("snake_case" in e for e in bad.errors)
    assert domain.initial_state["orders"]["W1"]["status"] == "pending"
    assert Task.objects.filter(domain=domain, status=TaskStatus.VALID).count() == 2
    rejected = Task.objects.get(domain=domain, status=TaskStatus.REJECTED)
    assert "teleport" in rejected.errors[0]
    trajectories = Trajectory.objects.filter(job=job)
    assert trajectories.count() == 4
    t = trajectories.first()
    assert t.status == TrajectoryStatus.JUDGED_PASS
    assert t.termination_reason == "final_answer"
    assert t.final_state["orders"]["W1"]["status"] == "cancelled"
    assert t.steps["3"]["patch"][0]["path"] == "/orders/W1/status"
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert t.verdicts.get().score == pytest.approx(0.9)
    assert job.summary["trajectories"] == {"judged_pass": 4}
    assert job.summary["tokens_in"] > 0 and job.summary["cost"] > 0
    assert LLMCall.objects.filter(job=job, error="").count() == job.summary["llm_calls"]


def test_invalid_tool_call_gets_structured_error_without_simulator(eager, llm_stub):
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    before = len(llm_stub.stage_requests("simulator"))
    llm_stub.inject(Reply(tool_calls=[{"name": "cancel_order", "arguments": {"order_id": 5}}]), stage="agent")
    job = rollout_queue(domain="shop", rollouts=1, tasks=1)
    t = Trajectory.objects.get(job=job)
    assert "invalid_tool_call" in t.messages[3]["content"]
    assert t.steps["3"]["rejected"] is True
    # The invalid call never reached the simulator.
    assert len(llm_stub.stage_requests("simulator")) == before


def test_a_rollout_stopped_by_its_step_limit_still_answers_the_customer(eager, llm_stub):
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    job = rollout_queue(domain="shop", rollouts=1, tasks=1, max_steps=1)
    t = Trajectory.objects.get(job=job)
    # The step limit came after the tool call; the agent was then asked, without tools, for its last answer.
    assert [m["role"] for m in t.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert t.termination_reason == "max_steps" and t.provenance["wrap_up"] is True
    wrap_up = llm_stub.stage_requests("agent")[-1].body
    assert "tools" not in wrap_up and "cannot call any more tools" in wrap_up["messages"][0]["content"]
    assert t.status == TrajectoryStatus.JUDGED_PASS


def test_a_patch_that_does_not_apply_is_asked_for_again_once(eager, llm_stub):
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    wrong_path = {
        "response": {"status": "cancelled"},
        "patch": [{"op": "replace", "path": "/orders/W9/status", "value": "x"}],
    }
    llm_stub.inject(Reply(content=wrong_path), stage="simulator")
    job = rollout_queue(domain="shop", rollouts=1, tasks=1)
    t = Trajectory.objects.get(job=job)
    assert t.steps["3"]["errors"] == [] and t.final_state["orders"]["W1"]["status"] == "cancelled"
    correction = llm_stub.stage_requests("simulator")[-1].messages[-1]["content"]
    assert correction.startswith("Your patch cannot be used: patch could not be applied")

    llm_stub.inject(Reply(content=wrong_path), Reply(content=wrong_path), stage="simulator")
    job = rollout_queue(domain="shop", rollouts=1, tasks=1)
    t = Trajectory.objects.get(job=job)
    # Still wrong: the response stands, the state is unchanged and the error is the step's.
    assert t.steps["3"]["errors"] == [
        "patch could not be applied: operation 0 (replace /orders/W9/status): member 'W9' not found"
    ]
    assert t.final_state == t.initial_state and "cancelled" in t.messages[3]["content"]


def test_a_failed_patch_is_described_without_quoting_the_state():
    from simia_web.simulation.simulator import state_apply

    users = {f"user_{i}": {"name": "x" * 100} for i in range(10_000)}  # 1 MB, like τ² retail's users
    state = {"users": users}
    kept, error = state_apply(state, [{"op": "remove", "path": "/users/nobody/name"}], None)
    assert (
        kept is state
        and error == "patch could not be applied: operation 0 (remove /users/nobody/name): member 'nobody' not found"
    )
    schema = {"type": "object", "properties": {"users": {"type": "array"}}}
    kept, error = state_apply(state, [{"op": "add", "path": "/users/user_1/age", "value": 3}], schema)
    assert kept is state and error.startswith("patched state breaks the state schema at users: {'user_0'")
    assert len(error) < 500


def test_a_read_only_api_is_asked_for_no_patch_and_any_it_writes_is_not_applied(llm_stub):
    from simia_web.simulation.simulator import simulate_call

    state = SHOP["initial_state"]
    deleting = {"response": '{"order_id": "W1"}', "patch": [{"op": "remove", "path": "/orders/W1"}]}
    llm_stub.inject(Reply(content=deleting), Reply(content=deleting), stage="simulator")
    outcome = simulate_call(
        client=client_for_stage("simulator"),
        api={"name": "get_order", "kind": "read", "parameters": {}},
        arguments={"order_id": "W1"},
        task="Where is W1?",
        state=state,
        state_schema=SHOP["state_schema"],
        history=[],
    )
    assert outcome["state_after"] is state and outcome["response"] == {"order_id": "W1"}
    assert outcome["errors"] == ["a read-only API cannot change the state: a patch of 1 operation(s) was not applied"]
    schema = llm_stub.stage_requests("simulator")[0].body["response_format"]["json_schema"]["schema"]
    assert schema["properties"]["patch"]["maxItems"] == 0
    path = answer_schema(state)["properties"]["patch"]["items"]["anyOf"][1]["properties"]["path"]["pattern"]
    assert re.match(path, "/orders/W1") and not re.match(path, "/orders") and not re.match(path, "/carts/1")


def test_faults_are_retried_recorded_and_never_crash(eager, llm_stub):
    llm_stub.reject_json_schema = True
    llm_stub.inject(
        Reply(status=429, error_message="slow down"),
        Reply(status=500, error_message="boom"),
        stage="agent",
    )
    llm_stub.inject(Reply(content="this is not json"), Reply(content={"response": {}}), stage="simulator")
    llm_stub.inject(Reply(content={"scores": {}}, finish_reason="length"), stage="judge")
    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=2)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    kinds = set(LLMCall.objects.filter(job=job).exclude(error_kind="").values_list("error_kind", flat=True))
    assert {"unsupported_mode", "rate_limited", "server_error", "invalid_json", "schema_invalid", "truncated"} <= kinds
    garbled, judged = Trajectory.objects.filter(job=job).order_by("id")
    # The simulator's garbage was recorded on the step; the rollout went on, and is kept out of the data.
    assert any("simulator failed" in e for e in garbled.steps["3"]["errors"])
    assert garbled.status == TrajectoryStatus.RULES_FAILED
    assert [(v.code, v.message_index) for v in garbled.violations.all()] == [("simulator_failed", 3)]
    assert judged.status == TrajectoryStatus.JUDGED_PASS  # judged after the judge's truncated answer was retried
    assert LLMCall.objects.filter(job=job, mode="json_object_schema").exists()  # json_schema refused


def test_timeouts_are_retried(eager, llm_stub):
    llm_stub.profile.timeout_seconds = 0.5
    llm_stub.profile.save()
    llm_stub.inject(Reply(delay=1.5, content="late"), stage="judge")
    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED
    assert LLMCall.objects.filter(job=job, error_kind="timeout").count() == 1
    assert Trajectory.objects.get(job=job).status == TrajectoryStatus.JUDGED_PASS


def test_the_queue_command_validates_and_sets_domain_text(eager, llm_stub, tmp_path):
    from django.core.management import CommandError, call_command

    with pytest.raises(CommandError, match="domains: item 1: Enter a valid .slug."):
        call_command("queue", "synthesize", "--param", "domains=not a slug!", "--param", "apis=3")
    with pytest.raises(CommandError, match="rollouts"):
        call_command("queue", "synthesize", "--param", "domains=shop", "--param", "rollouts=0")
    with pytest.raises(CommandError, match="param: 'colour=red': expected NAME=VALUE, NAME one of profiles, "):
        call_command("queue", "synthesize", "--param", "domains=shop", "--param", "colour=red")
    with pytest.raises(CommandError, match="policy: cannot read"):
        call_command("queue", "synthesize", "--param", "domains=shop", "--param", f"policy=@{tmp_path / 'none.md'}")
    policy = tmp_path / "policy.md"
    policy.write_text("Refunds need a receipt.")
    call_command(
        "queue",
        "synthesize",
        *("--param", "domains=shop", "--param", "apis=3", "--param", "tasks=1"),
        *("--param", "description=A shop", "--param", f"policy=@{policy}"),
        "--wait",
    )
    domain = Domain.objects.get(name="shop")
    assert (domain.description, domain.policy) == ("A shop", "Refunds need a receipt.")
    assert "Refunds need a receipt." in llm_stub.stage_requests("agent")[0].messages[0]["content"]


def test_progress_lists_stages_in_planning_order(eager, llm_stub):
    from simia_web.jobs.selectors import job_progress

    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    assert list(job_progress(job)) == ["api_synthesis", "task_synthesis", "rollout"]


def test_a_rollout_unit_writes_its_llm_calls_in_one_insert_with_its_result(eager, llm_stub, monkeypatch):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    from simia_web.jobs import services as job_services

    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    monkeypatch.setattr(job_services, "_enqueue_units", lambda unit_ids, **kwargs: None)  # run the units by hand
    job = rollout_queue(domain="shop", rollouts=3, tasks=1)
    first, second, _last = job.units.order_by("id")  # the last unit of a stage also finishes the job
    with CaptureQueriesContext(connection) as queries:
        job_services.unit_execute(unit_id=first.pk)
    first_statements = [q["sql"] for q in queries.captured_queries]
    with CaptureQueriesContext(connection) as queries:
        job_services.unit_execute(unit_id=second.pk)
    statements = [q["sql"] for q in queries.captured_queries]
    # Load the unit and its task (the domain and its APIs only for a job's first unit in a process); one
    # INSERT for the four calls and one that counts them for /metrics; then BEGIN, lock the unit, store the
    # trajectory and verdict, sign it in the near-duplicate index (its signature, its bands, its neighbours, and
    # here, as the scripted rollouts are copies of one another, its cluster), count it in the dashboard's rollups
    # (one upsert), mark the unit done, COMMIT; check
    # whether the stage is over. Each round trip gives up the GIL, which on a busy worker delays the other threads'
    # LLM requests.
    (calls_insert,) = [s for s in statements if s.startswith('INSERT INTO "llm_llmcall"')]
    assert "UNNEST" not in calls_insert  # large JSON documents go in as VALUES rows (see DocumentJSONField)
    assert len(statements) <= 17, statements
    assert len(first_statements) == len(statements) + 2, first_statements
    assert not any('FROM "catalog_api"' in s for s in statements)
    for trajectory in Trajectory.objects.filter(job=job):
        calls = list(LLMCall.objects.filter(job=job, id__in=trajectory.provenance["llm_calls"]).order_by("id"))
        assert len(calls) == 4 and trajectory.provenance["llm_calls"] == [call.pk for call in calls]
        assert trajectory.verdicts.get().llm_call_id == calls[-1].pk


def test_an_llm_call_inside_a_transaction_is_refused(transactional_db, llm_stub):
    client = client_for_stage(Stage.JUDGE)
    with transaction.atomic(), pytest.raises(RuntimeError, match="inside a database transaction"):
        client.chat(messages=[{"role": "user", "content": "hi"}])
    assert not llm_stub.requests
    assert client.chat(messages=[{"role": "user", "content": "hi"}]).data["role"] == "assistant"


def test_no_stage_calls_an_llm_inside_a_transaction(eager, llm_stub, users):
    """With no test transaction around them (transactional_db), any LLM call made inside an atomic block
    raises in the client: every stage, a job's units and an RL episode, runs through without one."""
    job = synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=2)
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert not LLMCall.objects.filter(error__contains="inside a database transaction").exists()
    client = APIClient()
    client.force_authenticate(users["curator"])
    task = Task.objects.filter(status=TaskStatus.VALID).first()
    env = client.post("/api/v1/envs/", {"task": task.pk}, format="json").json()
    respond = pipeline_responder()
    llm_stub.responder = lambda request: (
        Reply(content={"message": "Thanks.", "done": True}) if request.stage == "user_simulator" else respond(request)
    )
    for message in ({"tool_calls": [CANCEL_CALL]}, {"content": "Done: W1 is cancelled."}):
        result = client.post(f"/api/v1/envs/{env['id']}/step", {"message": message}, format="json")
        assert result.status_code == 200, result.content
    assert result.json()["done"] and result.json()["reward"] is not None


def test_a_tau2_task_rollout_opens_with_the_user_simulators_message(eager, llm_stub):
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    scenario = {
        "instructions": {
            "reason_for_call": "You want order W1 cancelled: wrong size.",
            "known_info": "Your name is Yusuf Rossi.",
            "unknown_info": "You do not remember your email address.",
        }
    }
    task = Task.objects.create(
        domain=Domain.objects.get(name="shop"),
        instruction="Reason for call: You want order W1 cancelled: wrong size.",
        user_scenario=scenario,
        expected_outcome="W1 cancelled",
    )
    respond = pipeline_responder()
    llm_stub.responder = lambda request: (
        Reply(content={"message": "Hello, I need to cancel an order.", "done": False})
        if request.stage == "user_simulator"
        else respond(request)
    )
    Task.objects.exclude(pk=task.pk).update(status=TaskStatus.REJECTED)
    job = rollout_queue(domain="shop", rollouts=1, tasks=1)
    trajectory = Trajectory.objects.get(job=job)
    assert trajectory.messages[1] == {"role": "user", "content": "Hello, I need to cancel an order."}
    assert "email" not in json.dumps(trajectory.messages)
    [opening] = llm_stub.stage_requests("user_simulator")
    assert "What you do not know: You do not remember your email address." in opening.messages[0]["content"]
    assert trajectory.termination_reason == "final_answer"


def test_a_teacher_message_with_too_many_tool_calls_runs_only_the_allowed_ones(eager, llm_stub):
    synthesis_queue(domains=["shop"], apis=3, tasks=1, rollouts=1)
    before = len(llm_stub.stage_requests("simulator"))
    calls = [{"name": "get_order", "arguments": {"order_id": "W1"}}] * 18
    llm_stub.inject(Reply(tool_calls=calls), stage="agent")
    job = rollout_queue(domain="shop", rollouts=1, tasks=1)
    trajectory = Trajectory.objects.get(job=job)
    assert len(llm_stub.stage_requests("simulator")) - before == 16
    refused = [m for m in trajectory.messages if m["role"] == "tool" and "too_many_tool_calls" in m["content"]]
    assert len(refused) == 2 and "max_tool_calls_per_step=16" in refused[0]["content"]
