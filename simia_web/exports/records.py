"""What every export writer shares: the rows records are made of, the gate each record passes (the strict
normaliser, then its format's validator) with the count of what it refused and why, and the manifest line
naming each record's provenance."""

import hashlib
import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import orjson

from simia_web.formats import FormatError
from simia_web.formats.conversation import ConversationMeasure, conversation_measure, messages_strict, tools_list
from simia_web.formats.openai import GatedRecord, openai_record_from_text, openai_record_strict

from .card_facts import DatasetFacts
from .selectors import export_records, stored_json

CHUNK_SIZE = 500
REFUSALS_KEPT = 1000
# Records between two reports of an export's progress (ExportStats.progress).
PROGRESS_EVERY = 1000
LINES_BYTES = 64 * 1024
ROW_FIELDS = (
    "id",
    "domain_id",
    "task_id",
    "messages",
    "tools",
    "status",
    "created_at",
    "version",
    "decision",
    "verdict",
    "kind",
    "seed_id",
    "job_id",
    "provenance",
    "termination_reason",
    "reward",
    "model",
)
# What an OpenAI record's line, its manifest line and the dataset card read of its row (fewer columns for the
# database to put in each row's JSON and for the part to parse).
OPENAI_ROW_FIELDS = (
    "id",
    "domain_id",
    "messages",
    "tools",
    "status",
    "version",
    "decision",
    "verdict",
    "kind",
    "seed_id",
    "provenance",
)


def refusal_kind(reason: str) -> str:
    """A reason without what differs from record to record (positions, quoted values, numbers), so reasons count
    together: "openai: messages[3].tool_call_id: no open call 'x'" → "openai: messages[].tool_call_id: no open
    call '…'"."""
    kind = re.sub(r"\[\d+\]", "[]", reason)
    kind = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", kind)
    return re.sub(r"\b\d+\b", "N", kind)[:160]


@dataclass
class ExportStats:
    count: int = 0
    repaired_count: int = 0
    refused_count: int = 0
    refusal_reasons: Counter = field(default_factory=Counter)
    refusals: list = field(default_factory=list)
    facts: DatasetFacts = field(default_factory=DatasetFacts)
    # Told the records handled so far (see `handled`) every PROGRESS_EVERY of them.
    progress: Callable[[int], None] | None = None
    _until_progress: int = field(init=False, repr=False, default=0)

    def __post_init__(self):
        self._until_progress = PROGRESS_EVERY

    @property
    def handled(self) -> int:
        """The records the gate has seen: written or left out."""
        return self.count + self.refused_count

    def written(self, row: dict, measure: ConversationMeasure) -> None:
        """A record is in the data: count it, and hand it (with its conversation's measure) to the dataset card."""
        self.count += 1
        self.facts.add(row, measure)
        self._handled_one()

    def as_part(self) -> dict:
        """What was counted over a part of the records, as JSON for merge_part (reasons in the order they first
        came: the report lists the most frequent first, ties in that order)."""
        return {
            "count": self.count,
            "repaired_count": self.repaired_count,
            "refused_count": self.refused_count,
            "refusal_reasons": list(self.refusal_reasons.items()),
            "refusals": self.refusals,
            "facts": self.facts.as_part(),
        }

    def merge_part(self, part: dict) -> None:
        """Add what a part counted (as_part); merged in id order, the counts are those of one pass."""
        self.count += part["count"]
        self.repaired_count += part["repaired_count"]
        self.refused_count += part["refused_count"]
        self.refusal_reasons.update(dict(part["refusal_reasons"]))
        self.refusals += part["refusals"][: REFUSALS_KEPT - len(self.refusals)]
        self.facts.merge_part(part["facts"])

    def refuse(self, trajectory_id: int, reasons: list[str]) -> None:
        self.refused_count += 1
        for kind in dict.fromkeys(refusal_kind(reason) for reason in reasons):
            self.refusal_reasons[kind] += 1
        if len(self.refusals) < REFUSALS_KEPT:
            self.refusals.append({"trajectory": trajectory_id, "reasons": reasons})
        self._handled_one()

    def _handled_one(self) -> None:
        """Count down to the next report of progress (every PROGRESS_EVERY records written or left out)."""
        self._until_progress -= 1
        if not self._until_progress:
            self._until_progress = PROGRESS_EVERY
            if self.progress is not None:
                self.progress(self.handled)


class Lines:
    """Lines for a binary stream, written about LINES_BYTES at a time: what a stream does per write (hash, compress,
    call into the file) is done once per block of records rather than once per record, and the bytes are the same.
    (Blocks much larger were slower: each fresh block costs memory faults.)"""

    def __init__(self, stream):
        self.stream = stream
        self.pending: list[bytes] = []
        self.pending_bytes = 0

    def add(self, line: bytes) -> None:
        self.pending.append(line)
        self.pending_bytes += len(line)
        if self.pending_bytes >= LINES_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.pending.append(b"")  # every line ends with its newline
            self.stream.write(b"\n".join(self.pending))
            self.pending, self.pending_bytes = [], 0


class Manifest:
    """`manifest.jsonl`: one line per record written, in the data's order, naming where it came from.

    A line: index (the record's place in the data: JSONL line number - 1, or index into tau2's simulations),
    trajectory_id, version (the trajectory version exported), status, the human decision in force (decision_id,
    decision, decided_by, decided_at, decision_made_on: the version the person was looking at, decision_version: the
    version the decision made, which is the exported one; null when none stands), the judge's
    latest verdict (judge_verdict_id, judge_passed, judge_score, judge_version: the version it judged) and sha256:
    the hash of the record's bytes exactly as written in the data (a JSONL line without its newline; a tau2
    simulation as its compact UTF-8 JSON).
    """

    def __init__(self, stream):
        self.stream, self.count = stream, 0
        self.lines = Lines(stream)

    def add(self, row: dict, record: bytes) -> None:
        decision = row["decision"] or {}
        verdict = row["verdict"] or {}
        line = {
            "index": self.count,
            "trajectory_id": row["id"],
            "version": row["version"],
            "status": row["status"],
            "decision_id": decision.get("id"),
            "decision": decision.get("decision"),
            "decided_by": decision.get("by"),
            "decided_at": decision.get("at"),
            "decision_made_on": decision.get("made_on_version"),
            "decision_version": decision.get("version"),
            "judge_verdict_id": verdict.get("id"),
            "judge_passed": verdict.get("passed"),
            "judge_score": None if verdict.get("score") is None else float(verdict["score"]),
            "judge_version": verdict.get("version"),
            "sha256": hashlib.sha256(record).hexdigest(),
        }
        self.lines.add(orjson.dumps(line))
        self.count += 1

    def flush(self) -> None:
        """Write the lines still held (the writer of the file set calls it once the records are written)."""
        self.lines.flush()
        self.stream.flush()


def manifest_lines_renumbered(source, lines: Lines, first: int) -> int:
    """Add a part's manifest lines (`source`, a binary file) to `lines`, their index counted from `first` (a part
    counts from 0; the index is each line's first key); returns the index after the last."""
    index = first
    for line in source:
        lines.add(b'{"index":%d' % index + line[line.index(b",") : -1])
        index += 1
    return index


def rows_stream(queryset, fields=ROW_FIELDS, chunk_size: int = CHUNK_SIZE) -> Iterator[dict]:
    """Rows as dicts in id order, `chunk_size` at a time, from one query.

    On PostgreSQL this is a server-side cursor (export_write holds the transaction it needs), so
    the rows are never all in memory and the table is read once, not re-sorted per chunk.
    """
    return queryset.order_by("pk").values(*fields).iterator(chunk_size=chunk_size)


def record_rows(queryset, fields=ROW_FIELDS, *, conversation_text: bool = False) -> Iterator[dict]:
    """The rows records are made of, each with the decision and verdict its manifest line names; with
    `conversation_text`, their messages and tools as JSON text, for gated_openai_record."""
    return export_records(queryset, fields, CHUNK_SIZE, conversation_text=conversation_text)


def strict_conversation(row: dict, stats: ExportStats) -> tuple[list[dict], list[dict]] | None:
    """The row's messages and tools as the strict normaliser returns them, or None (the row refused with the
    field it names) when it refuses them: a tool call without a name, a tool result without its call's id..."""
    try:
        return messages_strict(row["messages"]), tools_list(row["tools"])
    except FormatError as exc:
        stats.refuse(row["id"], [f"strict: {exc}"])
        return None


def gated_openai_record(row: dict, stats: ExportStats, format: str) -> GatedRecord | None:
    """The OpenAI record of a row whose messages and tools are JSON text (record_rows(conversation_text=True)), or
    None when the gate refuses it. The compiled path decodes the text straight into Structs
    (formats.openai.openai_record_from_text); what it does not pass goes the long way over the parsed values
    (openai_record_strict), which refuses the row naming the field the strict normaliser refuses, or what `format`'s
    validator finds in the record."""
    gated = openai_record_from_text(row["messages"], row["tools"])
    if gated is not None:
        return gated
    try:
        record, strict, problems = openai_record_strict(stored_json(row["messages"]), stored_json(row["tools"]))
    except FormatError as exc:
        stats.refuse(row["id"], [f"strict: {exc}"])
        return None
    if format_refused(row, stats, format, problems):
        return None
    return GatedRecord(json_line(record), record["messages"], record["tools"], conversation_measure(strict))


def format_refused(row: dict, stats: ExportStats, format: str, problems: list[str]) -> bool:
    if problems:
        stats.refuse(row["id"], [f"{format}: {problem}" for problem in problems])
    return bool(problems)


def json_line(record: dict) -> bytes:
    return orjson.dumps(record)
