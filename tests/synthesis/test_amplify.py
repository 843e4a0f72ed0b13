"""Seed amplification end to end against the scripted LLM server, executed in-process."""

import json
import random

import pytest
from django.core.management import call_command

from simia_web.catalog.models import Seed
from simia_web.catalog.services import seed_update
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.jobs.models import JobStatus
from simia_web.jobs.services import job_start
from simia_web.simulation.prompt_fit import tools_described
from simia_web.synthesis.amplify import seed_order
from simia_web.synthesis.services import amplification_queue
from tests.support.llm_stub import Reply
from tests.support.scripts import pipeline_responder

PARAMS = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
    "required": ["order_id"],
    "additionalProperties": False,
}
TOOLS = [
    {"type": "function", "function": {"name": "get_order", "description": "Look up an order.", "parameters": PARAMS}}
]
WORDS = [f"{stem}{i}" for i in range(12) for stem in ("amber", "basil", "cedar", "dune", "ember")]


def words(n: int, salt: int) -> str:
    return " ".join(random.Random(n * 1000 + salt).sample(WORDS, 14))


def conversation(n: int) -> list[dict]:
    """A valid conversation whose wording is unique to n (so outputs are not near-duplicates)."""
    call = {
        "id": f"c{n}",
        "type": "function",
        "function": {"name": "get_order", "arguments": json.dumps({"order_id": f"W{n}"})},
    }
    return [
        {"role": "user", "content": f"Order W{n}: {words(n, 1)}"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"c{n}", "content": json.dumps({"status": words(n, 2)})},
        {"role": "assistant", "content": f"Your order W{n}: {words(n, 3)}"},
    ]


def with_arguments(n: int, arguments) -> list[dict]:
    messages = conversation(n)
    messages[1]["tool_calls"][0]["function"]["arguments"] = arguments
    return messages


def malformed(seed_messages: list[dict]) -> dict[str, list[dict]]:
    """One broken conversation per rule code, each with its own wording."""
    c = conversation
    renamed = c(51)
    renamed[1]["tool_calls"][0]["function"]["name"] = "teleport"
    return {
        "unknown_tool": renamed,
        "arguments_not_json": with_arguments(52, "{order_id: W1"),
        "missing_required": with_arguments(53, "{}"),
        "unknown_parameter": with_arguments(54, json.dumps({"order_id": "W1", "colour": "red"})),
        "wrong_type": with_arguments(55, json.dumps({"order_id": 5})),
        "call_without_result": [m for m in c(56) if m["role"] != "tool"],
        "result_without_call": c(57)[:2] + [{"role": "tool", "tool_call_id": "nope", "content": "{}"}] + c(57)[2:],
        "roles_out_of_order": [c(58)[3], *c(58)],
        "empty_message": [{"role": "user", "content": ""}, *c(59)],
        "length_out_of_bounds": [c(60)[0], c(60)[3]],
        "near_duplicate": seed_messages,
    }


def first_payload(request) -> dict:
    """The app's JSON inputs (the first user message; a repair request comes after it)."""
    return json.loads(next(m["content"] for m in request.messages if m["role"] == "user"))


def script(outputs: dict[int, object]):
    """Answer the amplify stage per output index; everything else as in the domain-first script."""
    fallback = pipeline_responder()

    def respond(request):
        if request.stage == "amplify":
            answer = outputs[first_payload(request)["variation"]]
            return answer if isinstance(answer, Reply) else Reply(content={"messages": answer})
        return fallback(request)

    return respond


@pytest.fixture
def seed(eager):
    from simia_web.catalog.importers import seeds_import
    from simia_web.formats.openai import canonical_to_openai

    messages = conversation(999)
    messages[0]["content"] = "Hello, where is my order W999 please? " + words(999, 9)
    from django.core.files.uploadedfile import SimpleUploadedFile

    body = json.dumps(canonical_to_openai(messages, TOOLS)).encode()
    seeds_import(source=SimpleUploadedFile("shop.jsonl", body), format="openai", domain="shop")
    return Seed.objects.get()


def test_each_malformed_kind_is_caught_by_its_rule(seed, llm_stub):
    kinds = malformed(seed.messages)
    outputs = {0: conversation(0), 1: conversation(1)}
    merged = conversation(2)
    merged.insert(3, {"role": "assistant", "content": "One moment."})
    merged.append({"role": "assistant", "content": "Anything else?"})
    outputs[2] = merged
    for i, messages in enumerate(kinds.values(), start=3):
        outputs[i] = messages
    outputs[len(outputs)] = conversation(0)  # a copy of output 0: near-duplicate of a sibling
    garbage = len(outputs)
    outputs[garbage] = Reply(content="I cannot do that, sorry.")
    count = len(outputs)
    llm_stub.responder = script(outputs)

    job = amplification_queue(count=count, domain="shop")
    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED_WITH_ERRORS, job.error  # the garbage reply's trajectory
    by_index = {t.provenance["output"]: t for t in Trajectory.objects.filter(job=job)}
    assert len(by_index) == count == Trajectory.objects.filter(job=job, kind=TrajectoryKind.AMPLIFIED).count()

    for i in (0, 1, 2):
        t = by_index[i]
        assert t.status == TrajectoryStatus.JUDGED_PASS, list(t.violations.values_list("code", "detail"))
        assert t.seed_id == seed.pk and t.seed_version == seed.version and t.tools == TOOLS
    fixes = by_index[2].violations.filter(fixed=True)
    assert fixes.count() == 2 and set(fixes.values_list("code", flat=True)) == {"consecutive_assistant"}
    assert [m["role"] for m in by_index[2].messages] == ["user", "assistant", "tool", "assistant"]
    assert by_index[2].messages[3]["content"].startswith("One moment.\n\nYour order W2")

    for i, code in enumerate(kinds, start=3):
        t = by_index[i]
        codes = set(t.violations.filter(fixed=False).values_list("code", flat=True))
        assert code in codes, (code, codes)
        assert t.status == TrajectoryStatus.RULES_FAILED and not t.verdicts.exists()
    sibling = by_index[count - 2].violations.get(code="near_duplicate")
    assert f"trajectory {by_index[0].pk} of this job" in sibling.detail

    broken = by_index[garbage]
    assert broken.status == TrajectoryStatus.RULES_FAILED and broken.termination_reason == "llm_error"
    assert broken.violations.get().code == "llm_error" and "invalid_output" in broken.provenance["error"]

    assert job.summary["trajectories"]["judged_pass"] == 3
    reasons = job.summary["rejection_reasons"]
    assert reasons["llm_error"] == 1 and reasons["near_duplicate"] == 2 and reasons["unknown_tool"] == 1


def test_exact_count_round_robin_random_and_seed_version(seed, llm_stub, users):
    seed = seed_update(
        seed=seed,
        expected_version=1,
        actor=users["annotator"],
        messages=seed.messages[:3] + [{"role": "assistant", "content": "It is on its way, " + words(7, 7)}],
    )
    other = Seed.objects.create(
        domain=seed.domain, source_format="openai", messages=conversation(500), tools=TOOLS, content_hash="o"
    )
    llm_stub.responder = script({i: conversation(i) for i in range(6)})
    job = amplification_queue(count=6, domain="shop")
    trajectories = Trajectory.objects.filter(job=job).order_by("id")
    assert trajectories.count() == 6
    assert [t.seed_id for t in sorted(trajectories, key=lambda t: t.provenance["output"])] == [seed.pk, other.pk] * 3
    assert {t.seed_version for t in trajectories if t.seed_id == seed.pk} == {2}
    prompt = next(
        r for r in llm_stub.stage_requests("amplify") if first_payload(r)["seed_conversation"] == seed.messages
    )
    assert first_payload(prompt)["tools"] == tools_described(TOOLS)  # their parameters are in the schema

    job = amplification_queue(count=5, seed_ids=[other.pk, seed.pk], strategy="random", rng_seed=7)
    assert job.params["rng_seed"] == 7 and seed_order(job.params) == seed_order(dict(job.params))
    assert Trajectory.objects.filter(job=job).count() == 5
    picked = random.Random(7)
    assert [t.seed_id for t in sorted(Trajectory.objects.filter(job=job), key=lambda t: t.provenance["output"])] == [
        picked.choice(sorted([seed.pk, other.pk])) for _ in range(5)
    ]
    unrecorded = amplification_queue(count=1, strategy="random")
    assert isinstance(unrecorded.params["rng_seed"], int)


def test_queue_refuses_bad_requests(seed):
    with pytest.raises(ValidationFailed):
        amplification_queue(count=0)
    with pytest.raises(ValidationFailed):
        amplification_queue(count=1, domain="nowhere")
    Seed.objects.update(usable=False)
    with pytest.raises(ValidationFailed):
        amplification_queue(count=1)


def test_llm_outage_still_yields_every_trajectory(seed, llm_stub):
    llm_stub.responder = lambda request: Reply(status=500, error_message="down")
    job = amplification_queue(count=3)
    job.refresh_from_db()
    assert job.status == JobStatus.FAILED  # every call failed: stored, but nothing usable was made
    assert job.error.startswith("server_error: ")
    assert job.error.endswith("; all 3 units of its amplify stage failed or ended in an error)")
    assert all(unit.result["error"].startswith("server_error: ") for unit in job.units.all())  # each unit's error
    assert Trajectory.objects.filter(job=job, status=TrajectoryStatus.RULES_FAILED).count() == 3
    assert job.summary["rejection_reasons"] == {"llm_error": 3}


def test_command_waits_and_prints_summary(seed, llm_stub, capsys):
    llm_stub.responder = script({0: conversation(0), 1: conversation(1)})
    call_command("queue", "amplify", "--param", "count=2", "--param", "domain=shop", "--wait")
    out = capsys.readouterr().out
    assert "succeeded" in out and '"judged_pass": 2' in out


def test_seed_deleted_after_queueing_still_yields_every_trajectory(seed, llm_stub, monkeypatch):
    other = Seed.objects.create(
        domain=seed.domain, source_format="openai", messages=conversation(500), tools=TOOLS, content_hash="o"
    )
    llm_stub.responder = script({i: conversation(i) for i in range(4)})
    held = []
    monkeypatch.setattr("simia_web.jobs.services.task_send", lambda name, args: held.append(args[0]))
    job = amplification_queue(count=4, domain="shop")
    assert held == [job.pk]
    other_pk = other.pk
    other.delete()
    monkeypatch.undo()
    job_start(job_id=job.pk)

    job.refresh_from_db()
    assert job.status == JobStatus.FINISHED_WITH_ERRORS, job.error
    trajectories = Trajectory.objects.filter(job=job, kind=TrajectoryKind.AMPLIFIED)
    assert trajectories.count() == 4
    orphans = [t for t in trajectories if t.provenance["seed"] == other_pk]
    assert len(orphans) == 2
    for t in orphans:
        assert t.seed_id is None and t.domain_id == seed.domain_id and t.messages == []
        assert t.status == TrajectoryStatus.RULES_FAILED and t.termination_reason == "internal_error"
        violation = t.violations.get()
        assert violation.code == "internal_error" and violation.detail.startswith("DoesNotExist: ")
        assert "Traceback" not in violation.detail
    assert job.summary["rejection_reasons"] == {"internal_error": 2}
    assert job.summary["trajectories"]["judged_pass"] == 2


def test_post_processing_bug_still_yields_every_trajectory(seed, llm_stub, monkeypatch):
    def broken(*args, **kwargs):
        raise KeyError("tool_calls")

    monkeypatch.setattr("simia_web.synthesis.amplify.amplified_check", broken)
    llm_stub.responder = script({i: conversation(i) for i in range(3)})
    job = amplification_queue(count=3, domain="shop")

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED, job.error
    assert job.error.startswith("KeyError: 'tool_calls' (3 of 3 failures;")
    trajectories = Trajectory.objects.filter(job=job, kind=TrajectoryKind.AMPLIFIED)
    assert trajectories.count() == 3
    for t in trajectories:
        assert t.status == TrajectoryStatus.RULES_FAILED and t.seed_id == seed.pk and t.tools == TOOLS
        assert t.messages == conversation(t.provenance["output"])  # the raw reply, kept for inspection
        assert t.violations.get().detail == "KeyError: 'tool_calls'"
        assert len(t.provenance["llm_calls"]) == 1
    assert job.summary["rejection_reasons"] == {"internal_error": 3}
    assert job.summary["units"] == {"errored": 3}  # each stored an internal_error trajectory: none is done


def test_failure_while_storing_still_yields_every_trajectory(seed, llm_stub, monkeypatch):
    from simia_web.synthesis import amplify

    calls = []

    def fails_when_storing(messages, siblings, threshold):
        calls.append(messages)
        if len(calls) > 1:  # the run's check passes; the writer's recheck fails
            raise RuntimeError("sibling lookup broke")
        return []

    monkeypatch.setattr(amplify, "near_duplicate_violations", fails_when_storing)
    llm_stub.responder = script({0: conversation(0)})
    job = amplification_queue(count=1, domain="shop")

    job.refresh_from_db()
    assert job.status == JobStatus.FAILED, job.error
    t = Trajectory.objects.get(job=job)
    assert t.status == TrajectoryStatus.RULES_FAILED and t.messages == conversation(0) and not t.verdicts.exists()
    assert t.violations.get().detail == "RuntimeError: sibling lookup broke"
