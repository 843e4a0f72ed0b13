"""Export writers, one per format, converting canonical trajectories on the way out (the records, their
rules and repairs are formats/*'s; this module streams them).

Every writer streams: it reads trajectories in batches from one cursor (rows_stream) and writes
each record as soon as it is converted and checked, so memory stays flat at any size. A record
that breaks its format's rules is never written; it is refused with its reasons, which the
snapshot keeps.

File layout per format:
- openai: one JSONL file, `{"messages": [...], "tools": [...]}` per line.
- sharegpt: a zip holding `data.jsonl` (LLaMA-Factory ShareGPT rows) and `dataset_info.json`
  naming it, so the unzipped folder can be passed to LLaMA-Factory as `dataset_dir`.
- tau2: one JSON document `{"timestamp", "info", "tasks": [...], "simulations": [...]}` in the
  layout of τ²-bench results files.
"""

import json
import zipfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field

import orjson
from django.utils import timezone

from simia_web.catalog.models import Domain, Task
from simia_web.formats import FormatError
from simia_web.formats.openai import canonical_to_openai, openai_problems
from simia_web.formats.sharegpt import canonical_to_sharegpt, sharegpt_dataset_info, sharegpt_problems, sharegpt_repair
from simia_web.formats.tau2 import (
    tau2_simulation,
    tau2_simulation_problems,
    tau2_task,
    tau2_task_from_trajectory,
    tau2_task_id,
    tau2_task_problems,
)

CHUNK_SIZE = 500
REFUSALS_KEPT = 1000
ROW_FIELDS = ("id", "domain_id", "task_id", "messages", "tools", "steps", "status", "created_at")
TASK_FIELDS = ("id", "domain_id", "external_id", "instruction", "user_scenario", "expected_outcome", "expected_actions")
SIMULATION_FIELDS = (*ROW_FIELDS, "termination_reason", "reward", "judge_score", "judge_passed", "task__external_id")


@dataclass
class ExportStats:
    count: int = 0
    repaired_count: int = 0
    refused_count: int = 0
    refusal_reasons: Counter = field(default_factory=Counter)
    refusals: list = field(default_factory=list)

    def refuse(self, trajectory_id: int, reasons: list[str]) -> None:
        self.refused_count += 1
        for reason in reasons:
            self.refusal_reasons[reason.split(":", 1)[-1].strip()[:120]] += 1
        if len(self.refusals) < REFUSALS_KEPT:
            self.refusals.append({"trajectory": trajectory_id, "reasons": reasons})


def rows_stream(queryset, fields=ROW_FIELDS, chunk_size: int = CHUNK_SIZE) -> Iterator[dict]:
    """Rows as dicts in id order, `chunk_size` at a time, from one query.

    On PostgreSQL this is a server-side cursor (export_write holds the transaction it needs), so
    the rows are never all in memory and the table is read once, not re-sorted per chunk.
    """
    return queryset.order_by("pk").values(*fields).iterator(chunk_size=chunk_size)


def _line(record: dict) -> bytes:
    return orjson.dumps(record) + b"\n"


# --- OpenAI -------------------------------------------------------------------------------------


def write_openai(stream, queryset, stats: ExportStats, label: str) -> None:
    for row in rows_stream(queryset):
        try:
            record = canonical_to_openai(row["messages"], row["tools"])
        except (FormatError, KeyError, TypeError) as exc:
            stats.refuse(row["id"], [f"conversion: {exc}"])
            continue
        problems = openai_problems(record)
        if problems:
            stats.refuse(row["id"], problems)
            continue
        stream.write(_line(record))
        stats.count += 1


# --- ShareGPT (LLaMA-Factory) -------------------------------------------------------------------


class _ZipTarget:
    """Only write(): zipfile then streams entries with data descriptors and never seeks back."""

    def __init__(self, stream):
        self.stream = stream

    def write(self, data) -> int:
        return self.stream.write(data)

    def flush(self) -> None:
        self.stream.flush()


def write_sharegpt(stream, queryset, stats: ExportStats, label: str) -> None:
    with zipfile.ZipFile(_ZipTarget(stream), "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("data.jsonl", "w", force_zip64=True) as data:
            for row in rows_stream(queryset):
                try:
                    record = canonical_to_sharegpt(row["messages"], row["tools"])
                except (FormatError, KeyError, TypeError) as exc:
                    stats.refuse(row["id"], [f"conversion: {exc}"])
                    continue
                record, repairs = sharegpt_repair(record)
                problems = sharegpt_problems(record)
                if problems:
                    stats.refuse(row["id"], problems)
                    continue
                stats.repaired_count += bool(repairs)
                data.write(_line(record))
                stats.count += 1
        info = sharegpt_dataset_info(label, "data.jsonl")
        archive.writestr("dataset_info.json", json.dumps(info, indent=2, ensure_ascii=False))


# --- τ²-bench -----------------------------------------------------------------------------------


class _JsonArray:
    """Writes `"key": [item, item, ...]` one item at a time."""

    def __init__(self, stream, key: str):
        self.stream, self.empty = stream, True
        stream.write(b"," + orjson.dumps(key) + b":[")

    def add(self, record: dict) -> None:
        self.stream.write((b"" if self.empty else b",\n") + orjson.dumps(record))
        self.empty = False

    def close(self) -> None:
        self.stream.write(b"]")


def write_tau2(stream, queryset, stats: ExportStats, label: str) -> None:
    domain_names = dict(Domain.objects.values_list("id", "name"))
    stream.write(b'{"timestamp":' + orjson.dumps(timezone.now().isoformat()))
    stream.write(b',"info":' + orjson.dumps({"source": "simia-web", "dataset": label, "num_trials": 1}))
    tasks = _JsonArray(stream, "tasks")
    broken_tasks: dict[int, list[str]] = {}  # their simulations are refused with these reasons
    task_rows = Task.objects.filter(pk__in=queryset.filter(task__isnull=False).values("task_id"))
    for task in rows_stream(task_rows, fields=TASK_FIELDS):
        record = tau2_task(task, domain_names.get(task["domain_id"], ""))
        problems = tau2_task_problems(record)
        if problems:
            broken_tasks[task["id"]] = [f"task: {p}" for p in problems]
            continue
        tasks.add(record)
    for row in rows_stream(queryset.filter(task__isnull=True)):
        tasks.add(tau2_task_from_trajectory(row, domain_names.get(row["domain_id"], "")))
    tasks.close()
    simulations = _JsonArray(stream, "simulations")
    for row in rows_stream(queryset, fields=SIMULATION_FIELDS):
        if row["task_id"] in broken_tasks:
            stats.refuse(row["id"], broken_tasks[row["task_id"]])
            continue
        domain_name = domain_names.get(row["domain_id"], "")
        task_id = tau2_task_id(
            domain_name, task_pk=row["task_id"], external_id=row["task__external_id"] or "", trajectory_id=row["id"]
        )
        try:
            record = tau2_simulation(row, task_id, domain_name)
        except (KeyError, TypeError, AttributeError) as exc:
            stats.refuse(row["id"], [f"conversion: {exc}"])
            continue
        problems = tau2_simulation_problems(record)
        if problems:
            stats.refuse(row["id"], problems)
            continue
        simulations.add(record)
        stats.count += 1
    simulations.close()
    stream.write(b"}")


WRITERS = {"openai": write_openai, "sharegpt": write_sharegpt, "tau2": write_tau2}
EXTENSIONS = {"openai": "jsonl", "sharegpt": "zip", "tau2": "json"}
CONTENT_TYPES = {"openai": "application/jsonl", "sharegpt": "application/zip", "tau2": "application/json"}
