"""Simia-SFT amplification: each unit turns one seed into one new trajectory in a single LLM call.

A job of `count` outputs has exactly `count` units, and every unit stores exactly one trajectory,
whatever happens: an LLM failure is stored as a trajectory with an `llm_error` violation, any other
error (a seed deleted mid-job, a bug in post-processing) as one with an `internal_error` violation.
"""

import logging
import random

from django.db import transaction

from simia_web.catalog.models import Domain, Seed
from simia_web.core.jsonutil import compact_json
from simia_web.core.outages import is_outage
from simia_web.curation.duplicates import TRAJECTORIES
from simia_web.curation.models import Trajectory, TrajectoryKind
from simia_web.curation.services import trajectory_create
from simia_web.dedup.selectors import text_candidates
from simia_web.formats.conversation import Violation, conversation_text, message_text
from simia_web.formats.rules import amplified_check, near_duplicate_violations
from simia_web.jobs.models import Job
from simia_web.llm.client import LLMError, client_for_stage
from simia_web.llm.models import Stage
from simia_web.llm.services import llm_call_ids
from simia_web.simulation.judge import PROMPT_VERSION as JUDGE_PROMPT_VERSION
from simia_web.simulation.judge import judge_run
from simia_web.simulation.prompt_fit import json_size, messages_fit, text_clip, tools_described

from .amplify_answer import AMPLIFIED_ANSWER, amplified_messages, amplified_schema
from .trajectory_kinds import trajectory_unit_result

PROMPT_VERSION = "amplify-v2"  # v2: the conversation asked for as turns, the prompt fitted to the budget
STRATEGIES = ("round_robin", "random")

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "You write training data for tool-calling agents. Given a seed conversation, the tools and the domain "
    "policy, write ONE new, complete conversation of the same kind: a different user, different names, ids and "
    "values, a different but realistic request (or mix of requests), and the agent solving it by calling the "
    "tools. Write it as turns: in each, the user's message, the tool calls the agent makes for it (a tool name "
    "from the list, arguments matching the tool's parameters, and the tool's output, realistic and consistent "
    "with the calls and with each other) and the agent's answer to the user. The agent follows the policy. Do "
    "not copy the seed."
)


def amplify_prompt(
    *, seed_messages: list[dict], tools: list[dict], policy: str, variation: int, budget: int
) -> list[dict]:
    """The prompt within `budget` characters: the tools named and described (their parameters are in the
    answer's schema), the policy clipped, the seed's opening and latest turns; what was cut is listed."""
    cut: list[str] = []
    payload = {"policy": text_clip(policy, budget // 6), "tools": tools_described(tools), "variation": variation}
    room = budget - len(INSTRUCTIONS) - json_size(payload) - 300
    seed, seed_cut = messages_fit(seed_messages, room, keep_first=2)
    payload["seed_conversation"] = [{k: v for k, v in m.items() if k != "index"} for m in seed]
    cut += seed_cut
    if cut:
        payload["cut"] = cut
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": compact_json(payload)}]


def seed_order(params: dict) -> list[int]:
    """The seed of each output, reproducible from the job's params."""
    seeds, count = params["seeds"], params["count"]
    if params["strategy"] == "random":
        rng = random.Random(params["rng_seed"])
        return [rng.choice(seeds) for _ in range(count)]
    return [seeds[i % len(seeds)] for i in range(count)]


def _first_user_text(messages: list[dict]) -> str:
    return next((message_text(m) for m in messages if m.get("role") == "user"), "")


def _siblings(job, seed_id: int, exclude_unit, messages: list[dict]) -> list[tuple[str, list[dict]]]:
    """Outputs of the same seed in this job that the near-duplicate index finds for `messages`: the candidates the
    exact rule then compares, instead of every sibling."""
    candidates = text_candidates(corpus=TRAJECTORIES, workspace_id=job.workspace_id, text=conversation_text(messages))
    rows = (
        Trajectory.objects.filter(pk__in=candidates, job=job, seed_id=seed_id)
        .exclude(unit=exclude_unit)
        .order_by("pk")
        .values_list("pk", "messages")
    )
    return [(f"trajectory {pk} of this job", messages) for pk, messages in rows]


def _seed_domain_id(job: Job, seed_id: int) -> int | None:
    """The domain of a seed that may have been deleted since the job was queued."""
    recorded = job.params.get("seed_domains", {}).get(str(seed_id))
    if recorded is not None:
        return recorded
    domains = Domain.objects.filter(name=job.params.get("domain") or "", workspace=job.workspace_id)
    return domains.values_list("id", flat=True).first()


def amplify_unit_run(job: Job, unit):
    """Return the unit's writer; any failure, here or in the writer, still stores one trajectory."""
    seed_id = unit.params["seed"]
    # Filled in as the run goes, so a failure stores whatever was reached.
    partial = {
        "tools": [],
        "messages": [],
        "llm_calls": [],  # LLMCall rows; their ids go in the provenance once written
        "provenance": {
            "stage": "amplify",
            "prompt_version": PROMPT_VERSION,
            "seed": seed_id,
            "strategy": job.params["strategy"],
            "rng_seed": job.params.get("rng_seed"),
            "output": unit.params["index"],
        },
    }

    def failure_writer(exc: Exception):
        logger.exception("amplify unit %s (job %s) failed; storing it as internal_error", unit.pk, job.pk)
        return lambda: _internal_error_store(job=job, unit=unit, partial=partial, exc=exc)

    try:
        store = _amplified_writer(job, unit, partial)
    except Exception as exc:  # e.g. the seed was deleted, or a post-processing bug
        if is_outage(exc):
            raise  # not the output's failure: the job engine runs the unit again once the server is back
        return failure_writer(exc)

    def write():
        try:
            with transaction.atomic():  # a savepoint, so the failure can still be written after a database error
                return store()
        except Exception as exc:
            if is_outage(exc):
                raise
            return failure_writer(exc)()

    return write


def _internal_error_store(*, job: Job, unit, partial: dict, exc: Exception) -> dict:
    seed_id = partial["provenance"]["seed"]
    seed = Seed.objects.filter(pk=seed_id).first()
    detail = f"{type(exc).__name__}: {exc}"[:2000]
    violations = [Violation("internal_error", None, detail)]
    domain_id = seed.domain_id if seed else _seed_domain_id(job, seed_id)
    if domain_id is None:
        raise RuntimeError(f"cannot store output {unit.params['index']}: the domain of seed {seed_id} is gone") from exc
    trajectory = trajectory_create(
        kind=TrajectoryKind.AMPLIFIED,
        domain_id=domain_id,
        seed=seed,
        seed_version=partial["provenance"].get("seed_version"),
        job=job,
        unit=unit,
        messages=partial["messages"],
        tools=partial["tools"],
        termination_reason="internal_error",
        provenance={**partial["provenance"], "llm_calls": llm_call_ids(partial["llm_calls"]), "error": detail},
        violations=violations,
    )
    return trajectory_unit_result(trajectory, violations)


def _amplified_writer(job: Job, unit, partial: dict):
    params = job.params
    seed = Seed.objects.select_related("domain").get(pk=unit.params["seed"])
    tools = seed.tools or [api.as_tool() for api in seed.domain.apis.filter(valid=True)]
    partial["tools"] = tools
    profiles = params.get("profiles", {})
    client = client_for_stage(Stage.AMPLIFY, job_id=job.pk, profile_id=profiles.get(Stage.AMPLIFY))
    provenance = partial["provenance"]
    provenance.update(model=client.profile.model, profile=client.profile.name, seed_version=seed.version)
    fields = {"domain": seed.domain, "seed": seed, "seed_version": seed.version, "tools": tools}
    verdict = None
    schema = amplified_schema(tools)
    try:
        reply = client.structured(
            messages=amplify_prompt(
                seed_messages=seed.messages,
                tools=tools,
                policy=seed.domain.policy,
                variation=unit.params["index"],
                budget=client.prompt_chars_available(schema),
            ),
            schema=schema,
            schema_name="amplified_trajectory",
            accept=AMPLIFIED_ANSWER,
            prompt_version=PROMPT_VERSION,
            cache_salt=f"{job.pk}:{unit.key}",
        )
    except LLMError as exc:
        provenance.update(error=str(exc)[:2000])
        messages: list[dict] = []
        violations = [Violation("llm_error", None, str(exc)[:2000])]
        fields["termination_reason"] = "llm_error"
    else:
        partial["llm_calls"] = reply.calls
        partial["messages"] = amplified_messages(reply.data, seed.messages)
        messages, violations = amplified_check(
            partial["messages"],
            tools,
            seed_label=f"seed {seed.pk}",
            seed_messages=seed.messages,
            min_messages=params["min_messages"],
            max_messages=params["max_messages"],
            threshold=params["near_duplicate"],
        )
        partial["messages"] = messages
        siblings = _siblings(job, seed.pk, unit, messages)
        violations += near_duplicate_violations(messages, siblings, params["near_duplicate"])
        fields["termination_reason"] = "amplified"
        if not any(not v.fixed for v in violations):
            judge = client_for_stage(Stage.JUDGE, job_id=job.pk, profile_id=profiles.get(Stage.JUDGE))
            verdict = judge_run(
                client=judge,
                messages=messages,
                tools=tools,
                task="Serve the user's requests in this conversation. The first was: " + _first_user_text(messages),
                policy=seed.domain.policy,
                prompt_version=params.get("judge_prompt", JUDGE_PROMPT_VERSION),
            )

    def write():
        found = list(violations)
        if messages and not any(v.code == "near_duplicate" for v in found):
            # Outputs of the same seed that landed while this one was being judged.
            siblings = _siblings(job, seed.pk, unit, messages)
            found += near_duplicate_violations(messages, siblings, params["near_duplicate"])
        trajectory = trajectory_create(
            kind=TrajectoryKind.AMPLIFIED,
            job=job,
            unit=unit,
            messages=messages,
            provenance={**provenance, "llm_calls": llm_call_ids(partial["llm_calls"])},
            violations=found,
            verdict=verdict,
            **fields,
        )
        return trajectory_unit_result(trajectory, found)

    return write
