"""Export writers, one per format, converting canonical trajectories on the way out (the records, their
rules and repairs are formats/*'s; this module streams them through the gate and records their provenance).

An export is written in parts (a range of trajectory ids each, see exports.parts) and assembled: a format's part
writer (WRITERS) writes the records of one range, and its assembler (ASSEMBLERS) writes the data file from the
parts, in id order, streaming (a block at a time, never a whole part in memory). The bytes are those of one pass
over every record: a part holds the records as the data file holds them, and what surrounds them (a zip's
entries, τ²'s document) is written once, by the assembler.

Every part writer streams: it reads trajectories in batches from one cursor (rows_stream) and writes each record
as soon as it is converted and checked (lines of the manifest and of the ShareGPT data in blocks of about 64 KB,
records.Lines), so memory stays flat at any size.

The gate: a record is written only when the trajectory's messages and tools pass the strict normaliser
(formats.conversation.messages_strict and tools_list, the check people's input goes through; the record is
converted from what it returns; OpenAI and Parquet records take its compiled path, formats.openai.
openai_record_from_text, which decodes the stored text straight into Structs and decides exactly as it does) and
the record passes its format's validator. A record that fails either is left out with its reasons, which the
snapshot keeps; nothing else is dropped.

Each record written gets a manifest line (see records.Manifest) naming its trajectory, version, decision and verdict
and the sha256 of its bytes as written.

File layout per format (the data file; the manifest and the report sit beside it, see exports.services):
- openai: one JSONL file, `{"messages": [...], "tools": [...]}` per line and nothing else (OpenAI's
  fine-tuning upload refuses keys it does not know): line n of the manifest is line n of the data.
  A part: its lines.
- sharegpt: a zip holding `data.jsonl` (LLaMA-Factory ShareGPT rows, each with its `trajectory_id`, a column
  LLaMA-Factory leaves alone since dataset_info.json does not name it), `dataset_info.json` naming it, and
  `manifest.jsonl`, so the unzipped folder is LLaMA-Factory's `dataset_dir` and carries its provenance.
  A part: its lines of data.jsonl (the assembler deflates them all as one entry; zlib's output does not depend on
  how its input is cut).
- tau2: one JSON document `{"timestamp", "info", "tasks": [...], "simulations": [...]}` in the layout of
  τ²-bench results files; a simulation's id is `simia-<trajectory id>`, entry n of the manifest is simulation n.
  The tasks are the trajectories' tasks in task id order (each once), then one made from each trajectory without a
  task, in trajectory order. A part: its simulations, the records of its trajectories' tasks (each line
  `<task id> TAB <record>`, in task id order; the assembler merges the parts' lines, one per task) and its
  trajectories' own tasks.
- parquet: shards `data/train-00000-of-00003.parquet` (formats.parquet's columns: the OpenAI record's messages and
  tools nested, beside the columns a training team filters on), written a row group at a time; entry n of the
  manifest is row n of the shards read in name order (as `datasets` reads them), and its sha256 is that of the
  row's compact JSON in the schema's column order (pyarrow's `to_pylist()` of the row, dumped again, gives it).
  A part: its own shards (a shard never spans two parts), which the assembler links into `data/` and names.

Every record written is also handed to the dataset card's facts (ExportStats.written), so the card's numbers
are the data's.
"""

import heapq
import json
import shutil
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
from django.utils import timezone

from simia_web.catalog.models import Domain, Task
from simia_web.formats.conversation import conversation_measure
from simia_web.formats.sharegpt import canonical_to_sharegpt, sharegpt_dataset_info, sharegpt_problems, sharegpt_repair
from simia_web.formats.tau2 import (
    tau2_simulation,
    tau2_simulation_problems,
    tau2_task,
    tau2_task_from_trajectory,
    tau2_task_id,
    tau2_task_problems,
)

from .files import Shards
from .records import (
    OPENAI_ROW_FIELDS,
    ROW_FIELDS,
    ExportStats,
    Lines,
    Manifest,
    format_refused,
    gated_openai_record,
    json_line,
    record_rows,
    rows_stream,
    strict_conversation,
)

TASK_FIELDS = ("id", "domain_id", "external_id", "instruction", "user_scenario", "expected_outcome", "expected_actions")
SEEDLESS_TASK_FIELDS = ("id", "domain_id", "messages")
SIMULATION_FIELDS = (*ROW_FIELDS, "steps", "judge_score", "judge_passed", "task__external_id")
MANIFEST_ENTRY = "manifest.jsonl"  # the manifest's name inside the sharegpt zip


# --- OpenAI -------------------------------------------------------------------------------------


def write_openai(stream, queryset, stats: ExportStats, label: str, manifest: Manifest) -> None:
    for row in record_rows(queryset, OPENAI_ROW_FIELDS, conversation_text=True):
        gated = gated_openai_record(row, stats, "openai")
        if gated is None:
            continue
        stream.write(gated.line + b"\n")
        manifest.add(row, gated.line)
        stats.written(row, gated.measure)


# --- ShareGPT (LLaMA-Factory) -------------------------------------------------------------------


class _ZipTarget:
    """Only write(): zipfile then streams entries with data descriptors and never seeks back."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, data) -> int:
        return self.stream.write(data)

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        """The stream is the caller's to close (zipfile does not close a file object it was given)."""


def write_sharegpt(stream, queryset, stats: ExportStats, label: str, manifest: Manifest) -> None:
    """A part: its lines of data.jsonl."""
    data = Lines(stream)
    for row in record_rows(queryset):
        conversation = strict_conversation(row, stats)
        if conversation is None:
            continue
        record, repairs = sharegpt_repair(canonical_to_sharegpt(*conversation))
        if format_refused(row, stats, "sharegpt", sharegpt_problems(record)):
            continue
        stats.repaired_count += bool(repairs)
        line = json_line({**record, "trajectory_id": row["id"]})
        data.add(line)
        manifest.add(row, line)
        stats.written(row, conversation_measure(conversation[0]))
    data.flush()


def assemble_sharegpt(stream, parts: list, label: str, manifest_path: Path) -> None:
    """The zip: data.jsonl (the parts' lines, deflated as one entry), dataset_info.json and manifest.jsonl."""
    with zipfile.ZipFile(_ZipTarget(stream), "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("data.jsonl", "w", force_zip64=True) as entry:
            for part in parts:
                _copy(part.data, entry)
        info = sharegpt_dataset_info(label, "data.jsonl")
        archive.writestr("dataset_info.json", json.dumps(info, indent=2, ensure_ascii=False))
        with archive.open(MANIFEST_ENTRY, "w", force_zip64=True) as entry:
            _copy(manifest_path, entry)


# --- τ²-bench -----------------------------------------------------------------------------------


class Tau2Part:
    """Where a τ² part goes: its simulations (`data`), its trajectories' tasks (`tasks`, lines `<task id> TAB
    <record>` in task id order) and the tasks made from its trajectories without one (`seedless`); items of a list
    are separated by `,` and a newline, as in the document."""

    def __init__(self, data, tasks, seedless):
        self.data, self.tasks, self.seedless = data, tasks, seedless


SEPARATOR = b",\n"


def write_tau2(part: Tau2Part, queryset, stats: ExportStats, label: str, manifest: Manifest) -> None:
    domain_names = dict(Domain.objects.values_list("id", "name"))
    broken_tasks: dict[int, list[str]] = {}  # their simulations are refused with these reasons
    task_rows = Task.objects.filter(pk__in=queryset.filter(task__isnull=False).values("task_id"))
    task_lines = Lines(part.tasks)
    for task in rows_stream(task_rows, fields=TASK_FIELDS):
        record = tau2_task(task, domain_names.get(task["domain_id"], ""))
        problems = tau2_task_problems(record)
        if problems:
            broken_tasks[task["id"]] = [f"tau2: task: {p}" for p in problems]
            continue
        task_lines.add(b"%d\t" % task["id"] + orjson.dumps(record))
    task_lines.flush()
    seedless = _Items(part.seedless)
    for row in rows_stream(queryset.filter(task__isnull=True), fields=SEEDLESS_TASK_FIELDS):
        seedless.add(orjson.dumps(tau2_task_from_trajectory(row, domain_names.get(row["domain_id"], ""))))
    simulations = _Items(part.data)
    for row in record_rows(queryset, fields=SIMULATION_FIELDS):
        if row["task_id"] in broken_tasks:
            stats.refuse(row["id"], broken_tasks[row["task_id"]])
            continue
        conversation = strict_conversation(row, stats)
        if conversation is None:
            continue
        domain_name = domain_names.get(row["domain_id"], "")
        task_id = tau2_task_id(
            domain_name, task_pk=row["task_id"], external_id=row["task__external_id"] or "", trajectory_id=row["id"]
        )
        try:
            record = tau2_simulation({**row, "messages": conversation[0]}, task_id, domain_name)
        except (KeyError, TypeError, AttributeError) as exc:  # simulator data beside the messages (steps) is broken
            stats.refuse(row["id"], [f"conversion: {type(exc).__name__}: {exc}"])
            continue
        if format_refused(row, stats, "tau2", tau2_simulation_problems(record)):
            continue
        item = orjson.dumps(record)
        simulations.add(item)
        manifest.add(row, item)
        stats.written(row, conversation_measure(conversation[0]))


class _Items:
    """Items of a JSON list, written one at a time with the separator between them."""

    def __init__(self, stream, *, empty: bool = True):
        self.stream, self.empty = stream, empty

    def add(self, item: bytes) -> None:
        self.stream.write(item if self.empty else SEPARATOR + item)
        self.empty = False

    def add_file(self, path: Path) -> None:
        """The items a part wrote (separated already), after those written so far."""
        if path.stat().st_size:
            if not self.empty:
                self.stream.write(SEPARATOR)
            _copy(path, self.stream)
            self.empty = False


def _task_lines(path: Path) -> Iterator[tuple[int, bytes]]:
    with open(path, "rb") as lines:
        for line in lines:
            task_id, _, record = line.rstrip(b"\n").partition(b"\t")
            yield int(task_id), record


def assemble_tau2(stream, parts: list, label: str, manifest_path: Path) -> None:
    stream.write(b'{"timestamp":' + orjson.dumps(timezone.now().isoformat()))
    stream.write(b',"info":' + orjson.dumps({"source": "simia-web", "dataset": label, "num_trials": 1}))
    stream.write(b',"tasks":[')
    tasks, last = _Items(stream), None
    for task_id, record in heapq.merge(*(_task_lines(part.tasks) for part in parts), key=lambda line: line[0]):
        if task_id != last:  # a task several parts' trajectories share, once
            tasks.add(record)
            last = task_id
    for part in parts:
        tasks.add_file(part.seedless)
    stream.write(b'],"simulations":[')
    simulations = _Items(stream)
    for part in parts:
        simulations.add_file(part.data)
    stream.write(b"]}")


def write_parquet(shards: Shards, queryset, stats: ExportStats, label: str, manifest: Manifest) -> None:
    # pyarrow (tens of MB) is loaded by the process that writes Parquet, not by every web process.
    from .parquet_writer import write_parquet_shards

    write_parquet_shards(shards, queryset, stats, label, manifest)


def assemble_openai(stream, parts: list, label: str, manifest_path: Path) -> None:
    for part in parts:
        _copy(part.data, stream)


COPY_BYTES = 256 * 1024  # what an assembler reads of a part at a time


def _copy(path: Path, target) -> None:
    with open(path, "rb") as source:
        shutil.copyfileobj(source, target, COPY_BYTES)


# A part's records: the writer is given the part's data stream (Tau2Part for tau2, Shards for the SHARDED formats).
WRITERS: dict[str, Callable[..., None]] = {
    "openai": write_openai,
    "sharegpt": write_sharegpt,
    "tau2": write_tau2,
    "parquet": write_parquet,
}
# The data file from the parts (exports.parts.Part, in id order); the SHARDED formats' shards are put in place by
# exports.parts instead.
ASSEMBLERS: dict[str, Callable[..., None]] = {
    "openai": assemble_openai,
    "sharegpt": assemble_sharegpt,
    "tau2": assemble_tau2,
}
SHARDED = {"parquet"}  # writers given Shards (a data/ folder) rather than one stream
EXTENSIONS = {"openai": "jsonl", "sharegpt": "zip", "tau2": "json", "parquet": "parquet"}
CONTENT_TYPES = {
    "openai": "application/jsonl",
    "sharegpt": "application/zip",
    "tau2": "application/json",
    "parquet": "application/vnd.apache.parquet",
}
