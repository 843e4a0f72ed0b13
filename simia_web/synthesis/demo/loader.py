"""The demo data `make run` loads: a domain with its APIs and tasks, and trajectories judged and reviewed, so
every page has something to show on a fresh install."""

import copy
import json
from pathlib import Path

import jsonpatch
from django.db import transaction

from simia_web.accounts.models import Role, User
from simia_web.catalog.models import Domain, DomainSource
from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
from simia_web.curation.models import TrajectoryKind
from simia_web.curation.services import review_decide, trajectory_create
from simia_web.formats.rules import rules_check
from simia_web.simulation.episode import agent_system_prompt
from simia_web.simulation.judge import CRITERIA

DEMO_DIR = Path(__file__).resolve().parent


def _verdict(judge: dict | None) -> dict | None:
    if judge is None:
        return None
    return {
        "passed": judge["passed"],
        "score": judge["score"],
        "confidence": judge["confidence"],
        "scores": {c: judge["score"] for c in CRITERIA},
        "rationale": judge["rationale"],
        "cited_messages": judge["cited"],
        "model": "demo",
    }


def _demo_reviewer() -> User:
    """The account the demo's human reviews belong to; it cannot log in."""
    reviewer, created = User.objects.get_or_create(username="demo-reviewer", defaults={"role": Role.ANNOTATOR})
    if created:
        reviewer.set_unusable_password()
        reviewer.save(update_fields=["password"])
    return reviewer


@transaction.atomic
def demo_load() -> list[str]:
    """Load the demo domains that are not there yet; returns the names loaded."""
    loaded = []
    for path in sorted(DEMO_DIR.glob("*.json")):
        spec = json.loads(path.read_text())
        if Domain.objects.filter(name=spec["name"]).exists():
            continue
        domain = domain_ensure(
            name=spec["name"], description=spec["description"], policy=spec["policy"], source=DomainSource.DEMO
        )
        apis = apis_store(
            domain=domain, apis=spec["apis"], state_schema=spec["state_schema"], initial_state=spec["initial_state"]
        )
        tasks = tasks_store(domain=domain, tasks=spec["tasks"])
        tools = [api.as_tool() for api in apis if api.valid]
        system = {"role": "system", "content": agent_system_prompt(domain_name=domain.name, policy=domain.policy)}
        for item in spec["trajectories"]:
            messages = [system, *item["messages"]]
            state, steps = copy.deepcopy(spec["initial_state"]), {}
            for index, patch in item["patches"].items():
                state = jsonpatch.apply_patch(state, patch)
                steps[str(int(index) + 1)] = {"patch": patch, "state_after": state, "errors": []}
            trajectory = trajectory_create(
                kind=TrajectoryKind.DEMO,
                domain=domain,
                task=tasks[item["task"]],
                messages=messages,
                tools=tools,
                steps=steps,
                initial_state=spec["initial_state"],
                final_state=state,
                termination_reason="final_answer",
                violations=rules_check(messages, tools),
                verdict=_verdict(item["judge"]),
                provenance={"stage": "demo"},
            )
            if item.get("review"):
                review_decide(
                    trajectory=trajectory,
                    reviewer=_demo_reviewer(),
                    expected_version=trajectory.version,
                    **item["review"],
                )
        loaded.append(domain.name)
    return loaded
