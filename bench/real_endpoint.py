"""The stages' kinds of LLM calls against any OpenAI-compatible endpoint, and what each cost.

Makes, per stage, the calls the pipeline makes (API and task synthesis, the user simulator opening a
τ² task, an agent turn with the domain's tools, the simulator answering a tool call against the world
state, the judge, and amplification of the resulting conversation) with the app's own prompt builders
and client, on a τ²-bench domain (default: retail, 1.3 MB of state and 15 tools), and prints
per stage: calls, fallbacks taken, tokens in/out, the largest prompt against the context window,
prompts trimmed to fit, and failures by reason.

    OPENAI_BASE_URL=http://127.0.0.1:8089/v1 python bench/real_endpoint.py --probe --rounds 2

The profile is made from OPENAI_BASE_URL, OPENAI_API_KEY and SIMIA_MODEL as the app's default is.
A throwaway test database is created and dropped; the configured database is never touched.
"""

import argparse
import contextlib
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment, teardown_test_environment  # noqa: E402

from simia_web.llm.budget import ASSUMED_CONTEXT_WINDOW  # noqa: E402
from simia_web.llm.capabilities import endpoint_check  # noqa: E402
from simia_web.llm.client import LLMError, client_for_stage  # noqa: E402
from simia_web.llm.models import LLMCall, Stage  # noqa: E402
from simia_web.llm.selectors import profile_default  # noqa: E402
from simia_web.simulation.episode import agent_system_prompt  # noqa: E402
from simia_web.simulation.judge import judge_run  # noqa: E402
from simia_web.simulation.simulator import simulate_call  # noqa: E402
from simia_web.simulation.user_simulator import scenario_brief, user_turn  # noqa: E402
from simia_web.synthesis.amplify import amplify_prompt  # noqa: E402
from simia_web.synthesis.amplify_answer import AMPLIFIED_ANSWER, amplified_schema  # noqa: E402
from simia_web.synthesis.generation import apis_generate, tasks_generate  # noqa: E402

DEFAULT_DOMAIN = ROOT.parent / "shared" / "data" / "tau2" / "retail"
STAGES = [
    Stage.API_SYNTHESIS,
    Stage.TASK_SYNTHESIS,
    Stage.USER_SIMULATOR,
    Stage.AGENT,
    Stage.SIMULATOR,
    Stage.JUDGE,
    Stage.AMPLIFY,
]


def load_domain(path: Path) -> dict:
    tasks = json.loads((path / "tasks.json").read_text())
    return {
        "name": path.name,
        "policy": (path / "policy.md").read_text(),
        "tools": json.loads((path / "tools.json").read_text()),
        "state": json.loads((path / "db.json").read_text()),
        "tasks": [t["user_scenario"]["instructions"]["reason_for_call"] for t in tasks],
        "scenarios": [t["user_scenario"] for t in tasks],
    }


def agent_turn(domain: dict, task: str) -> dict:
    messages = [
        {"role": "system", "content": agent_system_prompt(domain_name=domain["name"], policy=domain["policy"])},
        {"role": "user", "content": task},
    ]
    try:
        return client_for_stage(Stage.AGENT).chat(messages=messages, tools=domain["tools"]).data
    except LLMError:
        return {"role": "assistant", "content": ""}


def first_call(message: dict, tools: list[dict]) -> tuple[dict, dict]:
    """The API and arguments of the agent's first tool call (or the first tool, for a model that made none)."""
    specs = {t["function"]["name"]: t["function"] for t in tools}
    for call in message.get("tool_calls") or []:
        name = call["function"]["name"]
        if name in specs:
            try:
                return specs[name], json.loads(call["function"]["arguments"])
            except ValueError:
                return specs[name], {}
    return tools[1]["function"], {"order_id": "#W2378156"}


def run(domain: dict, rounds: int) -> None:
    for round_index in range(rounds):
        task = domain["tasks"][round_index % len(domain["tasks"])]
        with contextlib.suppress(LLMError):  # recorded on its calls
            apis_generate(
                client=client_for_stage(Stage.API_SYNTHESIS),
                domain_name=domain["name"],
                description=f"the {domain['name']} domain of τ²-bench",
                policy=domain["policy"],
                count=3,
            )
        with contextlib.suppress(LLMError):
            tasks_generate(
                client=client_for_stage(Stage.TASK_SYNTHESIS),
                domain_name=domain["name"],
                policy=domain["policy"],
                apis=[{"name": t["function"]["name"], **t["function"]} for t in domain["tools"]],
                state=domain["state"],
                count=2,
            )
        brief = scenario_brief(domain["scenarios"][round_index % len(domain["scenarios"])])
        with contextlib.suppress(LLMError):
            task = user_turn(client=client_for_stage(Stage.USER_SIMULATOR), brief=brief, messages=[]).data["message"]
        message = agent_turn(domain, task)
        api, arguments = first_call(message, domain["tools"])
        api_spec = {"name": api["name"], "description": api.get("description", ""), "parameters": api["parameters"]}
        simulated = simulate_call(
            client=client_for_stage(Stage.SIMULATOR),
            api=api_spec,
            arguments=arguments,
            task=task,
            state=domain["state"],
            state_schema={},
            history=[],
        )
        call_id = "call_bench"
        trajectory = [
            {"role": "user", "content": task},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": api["name"], "arguments": json.dumps(arguments)},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": call_id, "content": json.dumps(simulated["response"])},
            {"role": "assistant", "content": message.get("content") or "Done."},
        ]
        judge_run(
            client=client_for_stage(Stage.JUDGE),
            messages=trajectory,
            tools=domain["tools"],
            task=task,
            policy=domain["policy"],
        )
        amplify(domain, trajectory, round_index)


def amplify(domain: dict, seed: list[dict], variation: int) -> None:
    client = client_for_stage(Stage.AMPLIFY)
    schema = amplified_schema(domain["tools"])
    prompt = amplify_prompt(
        seed_messages=seed,
        tools=domain["tools"],
        policy=domain["policy"],
        variation=variation,
        budget=client.prompt_chars_available(schema),
    )
    with contextlib.suppress(LLMError):
        client.structured(messages=prompt, schema=schema, schema_name="amplified_trajectory", accept=AMPLIFIED_ANSWER)


def report(window: int | None) -> None:
    shown = window or ASSUMED_CONTEXT_WINDOW
    print(f"context window: {window or f'not reported ({shown} assumed)'}")
    header = f"{'stage':<15} {'calls':>5} {'fallbacks':>9} {'tokens in':>9} {'tokens out':>10} {'largest prompt':>16}"
    print(header + f" {'trimmed':>7}  failures by reason")
    for stage in STAGES:
        calls = list(LLMCall.objects.filter(stage=stage))
        if not calls:
            continue
        fallbacks = sum(c.error_kind == "unsupported_mode" for c in calls)
        failures = Counter(c.error_kind for c in calls if c.error_kind and c.error_kind != "unsupported_mode")
        largest = max(c.tokens_in for c in calls)
        largest_prompt = f"{largest}/{shown} ({100 * largest // shown}%)"
        print(
            f"{stage:<15} {len(calls):>5} {fallbacks:>9} {sum(c.tokens_in for c in calls):>9} "
            f"{sum(c.tokens_out for c in calls):>10} {largest_prompt:>16} {sum(bool(c.trimmed) for c in calls):>7}  "
            + (", ".join(f"{kind} {n}" for kind, n in failures.most_common()) or "-")
        )
    modes = Counter((c.stage, c.mode) for c in LLMCall.objects.filter(error_kind=""))
    print("modes that answered: " + ", ".join(f"{stage} {mode} x{n}" for (stage, mode), n in sorted(modes.items())))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", type=Path, default=DEFAULT_DOMAIN, help="a τ²-bench domain directory")
    parser.add_argument("--rounds", type=int, default=2, help="calls of each stage's kind")
    parser.add_argument("--probe", action="store_true", help="run check_endpoint's probe first and use its findings")
    args = parser.parse_args()
    domain = load_domain(args.domain)

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    try:
        profile = profile_default()
        print(f"endpoint: {profile.base_url or 'OpenAI'}  model: {profile.model}")
        if args.probe:
            found = endpoint_check(profile=profile)
            for probe in found["evidence"]:
                status, verdict = probe["status"], probe["verdict"]
                print(f"  probe {probe['name']:<28} {status!s:>4} {verdict:<10} {probe['detail'][:70]}")
            print(f"  found: structured {found['structured']}, tools {found['tools']}")
        run(domain, args.rounds)
        profile.refresh_from_db()
        report(profile.context_window)
    finally:
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


if __name__ == "__main__":
    main()
