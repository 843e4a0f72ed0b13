"""CPU of the strict gate per 100k records, in this process (no database).

The gate is what every exported OpenAI record passes: the strict normaliser over the messages and tools
(formats.conversation.messages_strict and tools_list), the record built from what it returns
(formats.openai.strict_to_openai) and the OpenAI validator (formats.openai.openai_problems). It is timed with
time.process_time() over two record shapes: `export` (bench/export_throughput.py's five messages and one call)
and `review` (bench/review_data.py's sixteen messages and two calls), through the four calls the export makes today
and through formats.openai.openai_record_strict, which does the same in one call from the validated Structs.
`--reference` also times the pure-Python
normaliser every record went through before the compiled check (formats.conversation.messages_normalised and
tools_normalised, kept for the input that is not already canonical), so one run shows both.

    .venv/bin/python bench/gate_cpu.py --records 100000
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from simia_web.formats.conversation import (  # noqa: E402
    messages_normalised,
    messages_strict,
    tools_list,
    tools_normalised,
)
from simia_web.formats.openai import openai_problems, openai_record_strict, strict_to_openai  # noqa: E402

WORDS = "order refund the a is of shipped please cancel item address policy agent you we can help"
WORD_LIST = WORDS.split(" ")


def _tools(domain: str) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"{domain}_{verb}",
                "description": f"{verb} a {domain} record",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            },
        }
        for verb in ("get", "update", "cancel")
    ]


def _sentence(i: int, n: int = 14) -> str:
    return " ".join(WORD_LIST[(i * 7 + k * 13) % len(WORD_LIST)] for k in range(n))


def export_shape(i: int) -> tuple[list, list]:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "get_order",
                "description": "Look up an order by id.",
                "parameters": {
                    "type": "object",
                    "properties": {"order_id": {"type": "string"}},
                    "required": ["order_id"],
                },
            },
        }
    ]
    call = {
        "id": f"call_{i}",
        "type": "function",
        "function": {"name": "get_order", "arguments": f'{{"order_id": "W{i}"}}'},
    }
    messages = [
        {"role": "system", "content": "You are a helpful shop assistant. Follow the policy."},
        {"role": "user", "content": f"Hi, where is my order W{i}? I ordered it last week."},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f'{{"order_id": "W{i}", "status": "shipped"}}'},
        {"role": "assistant", "content": f"Your order W{i} has shipped and should arrive in two days."},
    ]
    return messages, tools


def review_shape(i: int) -> tuple[list, list]:
    domain = ("retail", "airline", "telecom")[i % 3]
    messages = [
        {"role": "system", "content": f"You are a {domain} agent. Follow the policy. " + _sentence(i, 30)},
        {"role": "user", "content": f"Hello, about {domain} item {i}: " + _sentence(i + 1)},
    ]
    for k in range(2):
        call_id = f"call_{i}_{k}"
        call = {"name": f"{domain}_get", "arguments": f'{{"id": "{domain[0].upper()}{i}"}}'}
        messages.append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function", "function": call}]}
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f'{{"status": "{_sentence(i, 1)}"}}'})
        messages.append({"role": "assistant", "content": _sentence(i + k)})
        messages.append({"role": "user", "content": _sentence(i + k + 2, 10)})
    messages.append({"role": "assistant", "content": "Done. " + _sentence(i + 5)})
    return messages, _tools(domain)


def gate_seconds(conversations, normalise_messages, normalise_tools) -> float:
    started = time.process_time()
    for messages, tools in conversations:
        record = strict_to_openai(normalise_messages(messages), normalise_tools(tools))
        if openai_problems(record):
            raise AssertionError("a valid record was refused")
    return time.process_time() - started


def gate_one_call_seconds(conversations) -> float:
    started = time.process_time()
    for messages, tools in conversations:
        if openai_record_strict(messages, tools)[2]:
            raise AssertionError("a valid record was refused")
    return time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reference", action="store_true", help="also time the pure-Python normaliser")
    args = parser.parse_args()
    per = 100_000 / args.records
    print("| shape | path | CPU s per 100k records |\n| --- | --- | ---: |")
    for name, shape in (("export", export_shape), ("review", review_shape)):
        conversations = [shape(i) for i in range(args.records)]
        paths = [("compiled", messages_strict, tools_list)]
        if args.reference:
            paths.insert(0, ("pure Python", messages_normalised, tools_normalised))
        for label, normalise_messages, normalise_tools in paths:
            seconds = gate_seconds(conversations, normalise_messages, normalise_tools)
            print(f"| {name} | {label} | {seconds * per:.2f} |")
        print(
            f"| {name} | compiled, one call (openai_record_strict) | {gate_one_call_seconds(conversations) * per:.2f} |"
        )


if __name__ == "__main__":
    main()
