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
import random
import sys
import time
from pathlib import Path

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]  # the project, and the loaders beside this script
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from export_throughput import export_conversation  # noqa: E402
from review_data import DOMAINS, domain_messages, domain_tools  # noqa: E402

from simia_web.formats.conversation import (  # noqa: E402
    messages_normalised,
    messages_strict,
    tools_list,
    tools_normalised,
)
from simia_web.formats.openai import openai_problems, openai_record_strict, strict_to_openai  # noqa: E402


def export_shape(i: int) -> tuple[list, list]:
    """bench/export_throughput.py's record: five messages and one call."""
    return export_conversation(i)


def review_shape(i: int) -> tuple[list, list]:
    """bench/review_data.py's record: sixteen messages and two calls, in one of its domains."""
    domain = DOMAINS[i % len(DOMAINS)]
    return domain_messages(random.Random(i), domain, i, unknown_tool=False), domain_tools(domain)


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
