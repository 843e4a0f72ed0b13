"""Simulator prompts against τ²-bench retail's 1.3 MB world state: does every one fit an 8k-token context?

Builds the simulator prompt of every tool call the retail tasks expect (the state sliced to the records
each call names) with the budget the default profile gives (max_tokens 2048 in an 8k window), and prints
the largest prompts in characters. With --tokenize URL (a llama-cpp-python server) it also counts the
tokens of the largest ones with the served model's tokenizer (one small request each).

    python bench/simulator_prompt_fit.py ../shared/data/tau2/retail [--tokenize http://127.0.0.1:8089]
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from simia_web.llm.client import DEFAULT_CONTEXT_TOKENS, LLMClient  # noqa: E402
from simia_web.llm.models import EndpointProfile  # noqa: E402
from simia_web.simulation.simulator import simulator_messages  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--tokenize", help="base URL of a llama-cpp-python server (its /extras/tokenize)")
    parser.add_argument("--largest", type=int, default=10)
    args = parser.parse_args()

    profile = EndpointProfile(max_tokens=2048, context_window=8192)
    budget = LLMClient(profile, stage="simulator").prompt_chars_available()
    state = json.loads((args.folder / "db.json").read_text())
    tools = {t["function"]["name"]: t["function"] for t in json.loads((args.folder / "tools.json").read_text())}
    tasks = json.loads((args.folder / "tasks.json").read_text())
    prompts, started = [], time.perf_counter()
    for task in tasks:
        for action in task["evaluation_criteria"].get("actions") or []:
            messages, cut = simulator_messages(
                api=tools[action["name"]],
                arguments=action["arguments"],
                task=json.dumps(task["user_scenario"]["instructions"]),
                state=state,
                history=[],
                budget=budget,
            )
            prompts.append((sum(len(m["content"]) for m in messages), action["name"], messages, cut))
    elapsed = (time.perf_counter() - started) * 1000 / len(prompts)
    prompts.sort(key=lambda p: -p[0])
    print(f"state: {len(json.dumps(state)):,} characters; {len(prompts)} simulator prompts, {elapsed:.0f} ms each")
    print(f"budget: {budget:,} characters (context {DEFAULT_CONTEXT_TOKENS}, max_tokens {profile.max_tokens})")
    print(f"largest prompt: {prompts[0][0]:,} characters; over budget: {sum(p[0] > budget for p in prompts)}")
    print(f"prompts with something cut: {sum(bool(p[3]) for p in prompts)}")
    if args.tokenize:
        import httpx

        room = DEFAULT_CONTEXT_TOKENS - profile.max_tokens
        counts = []
        for chars, name, messages, _ in prompts[: args.largest]:
            text = "\n".join(m["content"] for m in messages)
            try:
                answer = httpx.post(f"{args.tokenize}/extras/tokenize", json={"input": text}, timeout=120)
            except httpx.TimeoutException:  # the server answers one request at a time and may be busy
                print("  (the server did not answer in time: stopping here)")
                break
            tokens = len(answer.raise_for_status().json()["tokens"])
            counts.append(tokens)
            print(f"  {name:<36} {chars:>6} chars  {tokens:>5} tokens  ({chars / tokens:.2f} chars/token)")
        if counts:
            print(f"largest in tokens: {max(counts)} of {room} left beside max_tokens; fits: {max(counts) <= room}")


if __name__ == "__main__":
    main()
