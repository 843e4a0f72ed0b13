"""CPU of the strict gate per 100k records, in this process (no database).

The gate is what every exported OpenAI record passes: the strict normaliser over the messages and tools
(formats.conversation.messages_strict and tools_list), the record built from what it returns
(formats.openai.strict_to_openai) and the OpenAI validator (formats.openai.openai_problems). It is timed with
time.process_time() over two record shapes: `export` (bench/export_throughput.py's five messages and one call)
and `review` (bench/review_data.py's sixteen messages and two calls), through the four calls the export makes today
and through formats.openai.openai_record_strict, which does the same in one call from the validated Structs.

An export reads each conversation as the JSON text the database holds: `from stored text` times what the export
does per record from that text to the record's line and the dataset card's measure, the way it did
(orjson parse, openai_record_strict, orjson dump, conversation_measure) and the way it does
(formats.openai.openai_record_from_text: decoded straight into the Structs, the line encoded from them).
`--reference` also times the pure-Python
normaliser every record went through before the compiled check (formats.conversation.messages_normalised and
tools_normalised, kept for the input that is not already canonical), so one run shows both.

    .venv/bin/python bench/gate_cpu.py --records 100000
"""

import argparse
import gc
import json
import os
import random
import sys
import time
from pathlib import Path

import orjson

BENCH = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH.parent), str(BENCH)]  # the project, and the loaders beside this script
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from export_throughput import export_conversation  # noqa: E402
from review_data import DOMAINS, domain_messages, domain_tools  # noqa: E402

from simia_web.formats.conversation import (  # noqa: E402
    conversation_measure,
    messages_normalised,
    messages_strict,
    tools_list,
    tools_normalised,
)
from simia_web.formats.openai import (  # noqa: E402
    openai_problems,
    openai_record_from_text,
    openai_record_strict,
    strict_to_openai,
)


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


def stored_text_seconds(texts, gate) -> float:
    started = time.process_time()
    for messages_text, tools_text in texts:
        if gate(messages_text, tools_text) is None:
            raise AssertionError("a valid record was refused")
    return time.process_time() - started


def parsed_gate(messages_text: str, tools_text: str):
    record, strict, problems = openai_record_strict(orjson.loads(messages_text), orjson.loads(tools_text))
    return None if problems else (orjson.dumps(record), conversation_measure(strict))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--reference", action="store_true", help="also time the pure-Python normaliser")
    args = parser.parse_args()
    per = 100_000 / args.records
    print("| shape | path | CPU s per 100k records |\n| --- | --- | ---: |")
    for name, shape in (("export", export_shape), ("review", review_shape)):
        conversations = [shape(i) for i in range(args.records)]
        texts = [(json.dumps(messages), json.dumps(tools)) for messages, tools in conversations]  # jsonb's spacing
        # An export holds a chunk of rows at a time, not the bench's inputs, which the cyclic collector would otherwise
        # walk again and again while the gate runs: they are set aside from it.
        gc.freeze()
        paths = [("compiled", messages_strict, tools_list)]
        if args.reference:
            paths.insert(0, ("pure Python", messages_normalised, tools_normalised))
        for label, normalise_messages, normalise_tools in paths:
            seconds = gate_seconds(conversations, normalise_messages, normalise_tools)
            print(f"| {name} | {label} | {seconds * per:.2f} |")
        print(
            f"| {name} | compiled, one call (openai_record_strict) | {gate_one_call_seconds(conversations) * per:.2f} |"
        )
        for label, gate in (
            ("from stored text: parse, one call, dump", parsed_gate),
            ("from stored text: openai_record_from_text", openai_record_from_text),
        ):
            print(f"| {name} | {label} | {stored_text_seconds(texts, gate) * per:.2f} |")
        del conversations, texts
        gc.unfreeze()

if __name__ == "__main__":
    main()
