"""Export throughput, memory and the cost of the export gate against PostgreSQL.

Creates N accepted trajectories (with COPY) in a domain of their own, each with the review that accepted it and
a judge verdict (what its manifest line names), exports them with the same service the snapshot jobs use (data,
manifest, dataset card and report), and compares with dumping the same rows' JSON through PostgreSQL COPY. Each
export runs in a fresh child process so its peak RSS is its own. The dataset card's build (its plots and the reads
it makes besides the records) is timed on its own; Parquet's shards are listed with their sizes.

The gate (the strict normaliser over each record's messages and tools, then the format's validator) is measured
twice: the export again with the gate's functions replaced by pass-throughs in the child process (the same
conversion, manifest and files), and the gate's own CPU time over the same conversations in this process, which
does not move with the load of a shared machine. Both are printed per 100k records.

    DATABASE_URL=postgres://... python bench/export_throughput.py [--rows 100000] [--format FORMAT]

With --processes 1,2,4 it builds the rows as a snapshot job instead, once per count, on a real Celery worker with
that many prefork processes (CELERY_BROKER_URL must be Redis): its ranges of SIMIA_EXPORT_RANGE_RECORDS records are
units the processes share, merged by one unit at the end. Each build is timed from the job's start to its end
(planning, parts, merge, dataset card and report), beside its build and merge stages, the largest resident set of
any one of the worker's processes, and COPY of the same rows; every build's data must have the same sha256.

    DATABASE_URL=postgres://... CELERY_BROKER_URL=redis://... python bench/export_throughput.py --processes 1,2,4

The rows are deleted at the end unless --keep is given.
"""

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

DOMAIN = "bench-export"
REVIEWER = "bench-export-reviewer"
RSS_LIMIT_MB = 300


def _setup():
    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("This benchmark needs PostgreSQL: set DATABASE_URL=postgres://...")


def export_conversation(i: int) -> tuple[list, list]:
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
    messages = [
        {"role": "system", "content": "You are a helpful shop assistant. Follow the policy."},
        {"role": "user", "content": f"Hi, where is my order W{i}? I ordered it last week."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": f"call_{i}",
                    "type": "function",
                    "function": {"name": "get_order", "arguments": f'{{"order_id": "W{i}"}}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": f"call_{i}", "content": f'{{"order_id": "W{i}", "status": "shipped"}}'},
        {"role": "assistant", "content": f"Your order W{i} has shipped and should arrive in two days."},
    ]
    return messages, tools


def rows_create(n: int) -> int:
    """n accepted trajectories, each with its verdict and the review that accepted it, written with COPY."""
    import orjson
    from copy_rows import TableRows, identity_after_load
    from django.db import connection, transaction
    from django.utils import timezone

    from simia_web.accounts.models import User
    from simia_web.catalog.models import Domain
    from simia_web.curation.models import Decision, JudgeVerdict, Review, Trajectory, TrajectoryKind, TrajectoryStatus

    rows_delete()
    domain = Domain.objects.create(name=DOMAIN, description="export benchmark rows")
    reviewer = User.objects.create(username=REVIEWER)
    trajectories = TableRows(
        Trajectory,
        (
            "id",
            "kind",
            "status",
            "domain_id",
            "messages",
            "tools",
            "judge_passed",
            "judge_score",
            "termination_reason",
            "created_at",
            "updated_at",
        ),
    )
    verdicts = TableRows(JudgeVerdict, ("trajectory_id", "passed", "score", "trajectory_version", "created_at"))
    reviews = TableRows(Review, ("trajectory_id", "reviewer_id", "decision", "trajectory_version", "created_at"))
    first_id = (Trajectory.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    now = timezone.now()
    for start in range(0, n, 50_000):
        ids = range(first_id + start, first_id + min(n, start + 50_000))
        with transaction.atomic(), connection.cursor() as cursor:
            trajectories.copy(
                cursor,
                (
                    (pk, TrajectoryKind.DEMO, TrajectoryStatus.ACCEPTED, domain.pk)
                    + tuple(orjson.dumps(part).decode() for part in export_conversation(pk - first_id))
                    + (True, 0.9, "final_answer", now, now)
                    for pk in ids
                ),
            )
            verdicts.copy(cursor, ((pk, True, 0.9, 1, now) for pk in ids))
            reviews.copy(cursor, ((pk, reviewer.pk, Decision.ACCEPT, 1, now) for pk in ids))
            identity_after_load(cursor, Trajectory)
    rows_settle()
    return domain.pk


def rows_settle() -> None:
    """VACUUM ANALYZE the tables an export reads, as autovacuum would: the first read after a bulk insert writes every
    row's hint bits, which would slow whichever export runs first, and the planner needs the new rows' statistics
    (the small tables' too: without the domains', a range's rows were estimated at a hundred and sorted)."""
    from django.db import connection

    with connection.cursor() as cursor:
        tables = ("curation_trajectory", "curation_review", "curation_judgeverdict", "catalog_domain", "accounts_user")
        for table in tables:
            cursor.execute(f"VACUUM ANALYZE {table}")


def rows_delete() -> None:
    """The benchmark's rows, deleted in SQL (the ORM would read every row's id to cascade)."""
    from django.db import connection, transaction

    from simia_web.accounts.models import User
    from simia_web.catalog.models import Domain
    from simia_web.curation.models import JudgeVerdict, Review, Trajectory

    domain = Domain.objects.filter(name=DOMAIN).first()
    if domain is not None:
        with transaction.atomic(), connection.cursor() as cursor:
            ids = f"SELECT id FROM {Trajectory._meta.db_table} WHERE domain_id = %s"
            for model in (JudgeVerdict, Review):
                cursor.execute(f"DELETE FROM {model._meta.db_table} WHERE trajectory_id IN ({ids})", [domain.pk])
            cursor.execute(f"DELETE FROM {Trajectory._meta.db_table} WHERE domain_id = %s", [domain.pk])
        domain.delete()
    User.objects.filter(username=REVIEWER).delete()


def _gate_off() -> None:
    """In the child process: the gate's functions become pass-throughs (same conversion, manifest, files): OpenAI
    and Parquet records are parsed from the stored text and dumped as they are, unchecked."""
    from simia_web.exports import parquet_writer, records, writers

    records.messages_strict = lambda messages: messages
    records.tools_list = lambda tools: tools
    for validator in ("openai_problems", "sharegpt_problems", "tau2_simulation_problems"):
        setattr(writers, validator, lambda record: [])
    writers.gated_openai_record = parquet_writer.gated_openai_record = _ungated_openai_record


def _ungated_openai_record(row: dict, stats, format: str):
    import orjson

    from simia_web.formats.conversation import conversation_measure
    from simia_web.formats.openai import GatedRecord

    messages, tools = orjson.loads(row["messages"]), orjson.loads(row["tools"])
    line = orjson.dumps({"messages": messages, "tools": tools})
    return GatedRecord(line, messages, tools, conversation_measure(messages))


def _peak_rss_kb() -> int:
    """This process's peak resident memory. Linux keeps ru_maxrss across exec, so a child forked from a parent
    that built the rows would report the parent's peak: VmHWM belongs to the process's own memory map."""
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except (OSError, StopIteration):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _card_timed(clock) -> None:
    """In the child process: laps of `clock` around the card writer, which then reads "records" (reading,
    converting and writing the records, the manifest too) and "card" (what the card adds to a snapshot's build)."""
    from simia_web.exports import card

    card_write = card.card_write

    def timed(*args, **kwargs):
        clock.lap("records")
        try:
            return card_write(*args, **kwargs)
        finally:
            clock.lap("card")

    card.card_write = timed  # the export imports it from the card module when it writes the card


def export_child(fmt: str, output: str, gate: bool) -> dict:
    """Runs in the child process: the export (with its dataset card, as a snapshot has), with its own peak RSS."""
    from copy_rows import PhaseClock

    from simia_web.exports.selectors import export_filters_clean
    from simia_web.exports.services import ExportOptions, export_write

    if not gate:
        _gate_off()
    clock = PhaseClock()
    _card_timed(clock)
    result = export_write(
        format=fmt, filters=export_filters_clean({"domain": DOMAIN}), path=Path(output), options=ExportOptions()
    )
    clock.lap("report")
    records, card = clock.phases["records"], clock.phases["card"]
    return {
        "rows": result.stats.count,
        "refused": result.stats.refused_count,
        "seconds": records.seconds,
        "cpu_seconds": records.python_cpu,
        "database_cpu_seconds": records.database_cpu,
        "card_seconds": card.seconds,
        "bytes": result.bytes,
        "shards": [f.bytes for f in result.data_files],
        "manifest_bytes": result.file("manifest").bytes,
        "peak_rss_mb": _peak_rss_kb() / 1024,
    }


def gate_cpu_seconds(fmt: str, n: int) -> tuple[float, float]:
    """CPU seconds of converting n conversations without and with the gate (in this process, no database). OpenAI
    and Parquet records come from the conversation's stored text, as the export reads them: without the gate parsed
    and dumped, with it through formats.openai.openai_record_from_text, which decodes, checks and encodes."""
    from simia_web.formats.conversation import messages_strict, tools_list
    from simia_web.formats.sharegpt import canonical_to_sharegpt, sharegpt_problems, sharegpt_repair
    from simia_web.formats.tau2 import tau2_simulation, tau2_simulation_problems

    conversations = [export_conversation(i) for i in range(n)]
    if fmt in ("openai", "parquet"):
        texts = [(json.dumps(messages), json.dumps(tools)) for messages, tools in conversations]  # jsonb's spacing
        return _seconds(texts, _stored_text_plain(fmt)), _seconds(texts, _stored_text_gated(fmt))

    def tau2(messages, tools):
        row = {"id": 1, "messages": messages, "steps": {}, "created_at": None, "judge_score": 0.9, "reward": None}
        return tau2_simulation(
            {**row, "termination_reason": "final_answer", "status": "accepted", "judge_passed": True}, "d/1", "d"
        )

    convert, validate = {
        "sharegpt": (lambda m, t: sharegpt_repair(canonical_to_sharegpt(m, t))[0], sharegpt_problems),
        "tau2": (tau2, tau2_simulation_problems),
    }[fmt]

    def gated(messages, tools):
        assert not validate(convert(messages_strict(messages), tools_list(tools)))

    return _seconds(conversations, convert), _seconds(conversations, gated)


def _seconds(inputs, convert) -> float:
    started = time.process_time()
    for first, second in inputs:
        convert(first, second)
    return time.process_time() - started


def _stored_text_plain(fmt: str):
    import orjson

    from simia_web.formats.conversation import conversation_measure
    from simia_web.formats.parquet import parquet_row

    def plain(messages_text, tools_text):
        record = {"messages": orjson.loads(messages_text), "tools": orjson.loads(tools_text)}
        conversation_measure(record["messages"])
        return parquet_row(record, {}) if fmt == "parquet" else orjson.dumps(record)

    return plain


def _stored_text_gated(fmt: str):
    from simia_web.formats.openai import openai_record_from_text
    from simia_web.formats.parquet import parquet_row

    def gated(messages_text, tools_text):
        record = openai_record_from_text(messages_text, tools_text)
        assert record is not None
        return parquet_row(record.record(), {}) if fmt == "parquet" else record.line

    return gated


def copy_dump(domain_id: int, output: Path) -> dict:
    """The floor: the same rows' JSON straight out of PostgreSQL with COPY, no conversion or checks."""
    from copy_rows import PhaseClock
    from django.db import connection

    sql = (
        "COPY (SELECT json_build_object('messages', messages, 'tools', tools) FROM curation_trajectory "
        f"WHERE domain_id = {int(domain_id)} AND status = 'accepted' ORDER BY id) TO STDOUT"
    )
    clock = PhaseClock()
    size = rows = 0
    with connection.cursor() as cursor, cursor.copy(sql) as copy, open(output, "wb") as handle:
        for data in copy:
            handle.write(data)
            size += len(data)
            rows += bytes(data).count(b"\n")
    spent = clock.lap("COPY")
    return {
        "rows": rows,
        "seconds": spent.seconds,
        "cpu_seconds": spent.python_cpu,
        "database_cpu_seconds": spent.database_cpu,
        "bytes": size,
    }


def _job_done(job, *, timeout: float = 3600):
    deadline = time.monotonic() + timeout
    while job.refresh_from_db() or job.is_active:
        if time.monotonic() > deadline:
            sys.exit(f"job {job.pk} still {job.status} after {timeout:.0f} s")
        time.sleep(0.1)
    return job


def _tree_cpu(pid: int) -> float:
    """CPU seconds (user and system) a worker and its pool's processes have spent so far."""
    import psutil

    total = 0.0
    root = psutil.Process(pid)
    for process in [root, *root.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += sum(process.cpu_times()[:2])
    return total


def _stage_seconds(job, stage: str) -> float:
    from django.db.models import Max, Min

    span = job.units.filter(stage=stage).aggregate(first=Min("started_at"), last=Max("finished_at"))
    return (span["last"] - span["first"]).total_seconds() if span["first"] and span["last"] else 0.0


def snapshot_jobs(fmt: str, processes: list[int], exports_dir: Path) -> list[dict]:
    """The rows built as a snapshot job on a worker of each number of prefork processes (see the module's notes)."""
    from copy_rows import PeakMemory
    from django.conf import settings

    from simia_web.exports.models import Snapshot
    from simia_web.exports.services import snapshot_create
    from simia_web.jobs.models import JobStatus
    from tests.support.processes import WorkerProcess

    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        sys.exit("--processes needs a Celery worker on Redis: set CELERY_BROKER_URL=redis://...")
    runs = []
    for count in processes:
        env = {**os.environ, "SIMIA_EXPORTS_DIR": str(exports_dir)}
        worker = WorkerProcess(env, count, hostname=f"bench-export-{count}@%h", pool="prefork").start()
        try:
            # A snapshot of none of the rows: once it is built, the worker and its processes are up.
            _job_done(snapshot_create(format=fmt, filters={"domain": DOMAIN, "status": "rejected"}).job)
            cpu_before = _tree_cpu(worker.pid)
            with PeakMemory(worker.pid) as memory:
                snapshot = snapshot_create(format=fmt, filters={"domain": DOMAIN})
                job = _job_done(snapshot.job)
            cpu = _tree_cpu(worker.pid) - cpu_before
        finally:
            worker.stop()
        snapshot = Snapshot.objects.get(pk=snapshot.pk)
        if job.status != JobStatus.SUCCEEDED:
            sys.exit(f"the snapshot job {job.pk} {job.status}: {job.error}")
        runs.append(
            {
                "processes": count,
                "rows": snapshot.count,
                "parts": job.units.filter(stage="build").count(),
                "seconds": (job.finished_at - job.started_at).total_seconds(),
                "build_seconds": _stage_seconds(job, "build"),
                "merge_seconds": _stage_seconds(job, "merge"),
                "peak_rss_mb": memory.peak / 2**20,
                "worker_cpu_seconds": cpu,
                "sha256": snapshot.sha256,
                "bytes": snapshot.bytes,
            }
        )
        print(f"{count} process(es): {runs[-1]}", file=sys.stderr)
    return runs


def _snapshot_report(fmt: str, runs: list[dict], copy: dict) -> None:
    from django.conf import settings

    first = runs[0]
    print(
        f"snapshot {fmt}: {first['rows']} records in {first['parts']} parts of {settings.EXPORT_RANGE_RECORDS} "
        f"records, {first['bytes'] / 1e6:.1f} MB data; COPY of the same rows {copy['seconds']:.2f}s; "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        "| processes | snapshot (s) | × COPY | × 1 process | build stage (s) | merge unit (s) | worker CPU (s) "
        "| peak RSS (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for run in runs:
        print(
            f"| {run['processes']} | {run['seconds']:.2f} | {run['seconds'] / copy['seconds']:.1f} | "
            f"{run['seconds'] / first['seconds']:.2f} | {run['build_seconds']:.2f} | {run['merge_seconds']:.2f} | "
            f"{run['worker_cpu_seconds']:.1f} | {run['peak_rss_mb']:.0f} |"
        )
    same = len({run["sha256"] for run in runs}) == 1
    print(f"data sha256 {'the same in every build' if same else 'DIFFERENT between builds'}: {first['sha256']}")


def _export(fmt: str, output: Path, gate: bool) -> dict:
    command = [sys.executable, __file__, "--format", fmt, "--child", str(output)]
    child = subprocess.run([*command, *([] if gate else ["--no-gate"])], check=True, capture_output=True, text=True)
    return json.loads(child.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--format", default="openai", choices=["openai", "sharegpt", "tau2", "parquet"])
    parser.add_argument("--keep", action="store_true", help="Keep the benchmark rows afterwards.")
    parser.add_argument("--reuse", action="store_true", help="Export rows left by an earlier --keep run.")
    parser.add_argument(
        "--processes", help="Build a snapshot job on a worker of each of these numbers of processes, e.g. 1,2,4."
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)  # internal: run the export and print JSON
    parser.add_argument("--no-gate", action="store_true", help=argparse.SUPPRESS)  # internal, with --child
    args = parser.parse_args()
    _setup()
    if args.child:
        print(json.dumps(export_child(args.format, args.child, gate=not args.no_gate)))
        return

    from simia_web.catalog.models import Domain

    if args.reuse and Domain.objects.filter(name=DOMAIN).exists():
        domain_id = Domain.objects.get(name=DOMAIN).pk
    else:
        started = time.perf_counter()
        domain_id = rows_create(args.rows)
        print(
            f"created {args.rows} trajectories, each with a review and a verdict, "
            f"in {time.perf_counter() - started:.1f}s"
        )
    if args.processes:
        try:
            with tempfile.TemporaryDirectory() as tmp:
                copy = copy_dump(domain_id, Path(tmp) / "copy.out")
                runs = snapshot_jobs(args.format, [int(n) for n in args.processes.split(",")], Path(tmp) / "exports")
                copy = min(copy, copy_dump(domain_id, Path(tmp) / "copy.out"), key=lambda run: run["seconds"])
        finally:
            if not args.keep:
                rows_delete()
        _snapshot_report(args.format, runs, copy)
        return
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # Twice each, alternating, the faster of each kept: the second read of the rows is the cheaper one,
            # and a shared machine's load comes and goes.
            copies = [copy_dump(domain_id, Path(tmp) / "copy.out")]
            runs = [_export(args.format, Path(tmp) / f"{i}.out", gate=bool(i % 2)) for i in range(4)]
            copies.append(copy_dump(domain_id, Path(tmp) / "copy.out"))
            ungated = min(runs[0::2], key=lambda run: run["seconds"])
            export = min(runs[1::2], key=lambda run: run["seconds"])
            copy = min(copies, key=lambda run: run["seconds"])
    finally:
        if not args.keep:
            rows_delete()
    sample = min(export["rows"], 20_000) or 1
    plain_cpu, gated_cpu = gate_cpu_seconds(args.format, sample)
    export_rate = export["rows"] / export["seconds"]
    ungated_rate = ungated["rows"] / ungated["seconds"]
    copy_rate = copy["rows"] / copy["seconds"]
    per_100k = 100_000 / max(export["rows"], 1)
    peak = max(run["peak_rss_mb"] for run in runs)
    print(
        f"export {args.format}: {export['rows']} rows in {export['seconds']:.2f}s = {export_rate:,.0f} rows/s, "
        f"{export['bytes'] / 1e6:.1f} MB data + {export['manifest_bytes'] / 1e6:.1f} MB manifest, "
        f"peak RSS {peak:.0f} MB over the runs ({'under' if peak < RSS_LIMIT_MB else 'OVER'} {RSS_LIMIT_MB} MB)"
    )
    print(
        f"  without the gate: {ungated['rows']} rows in {ungated['seconds']:.2f}s = {ungated_rate:,.0f} rows/s; "
        f"the gate adds {(export['seconds'] - ungated['seconds']) * per_100k:+.2f}s per 100k records (wall clock), "
        f"{(export['cpu_seconds'] - ungated['cpu_seconds']) * per_100k:+.2f}s of the export process's CPU "
        f"({export['cpu_seconds']:.2f}s with it, {ungated['cpu_seconds']:.2f}s without)"
    )
    print(
        f"  the gate's CPU (strict normaliser + {args.format} validator, or the compiled gate from the stored text, "
        f"{sample} records in-process): "
        f"{(gated_cpu - plain_cpu) * 100_000 / sample:.2f}s per 100k records "
        f"(conversion alone {plain_cpu * 100_000 / sample:.2f}s, with the gate {gated_cpu * 100_000 / sample:.2f}s)"
    )
    shards = export["shards"]
    print(
        f"  the dataset card: built in {export['card_seconds']:.2f}s (not in the export's time above); "
        f"{len(shards)} data file(s) of {', '.join(f'{size / 1e6:.1f}' for size in shards)} MB"
    )
    print(
        f"COPY json:   {copy['rows']} rows in {copy['seconds']:.2f}s = {copy_rate:,.0f} rows/s, "
        f"{copy['bytes'] / 1e6:.1f} MB (the faster of one before and one after the exports)"
    )
    snapshot = export["seconds"] + export["card_seconds"]
    print(
        f"ratio: the export takes {export['seconds'] / copy['seconds']:.1f}x the time of COPY "
        f"({export_rate / copy_rate:.2f} of its rows/s); with its dataset card, as a snapshot is built, "
        f"{snapshot / copy['seconds']:.1f}x"
    )
    export_cpu = export["cpu_seconds"] + (export["database_cpu_seconds"] or 0)
    copy_cpu = copy["cpu_seconds"] + (copy["database_cpu_seconds"] or 0)
    print(
        f"CPU (what the load of a shared machine does not change): the export {export['cpu_seconds']:.1f}s Python + "
        f"{export['database_cpu_seconds'] or 0:.1f}s PostgreSQL, COPY {copy['cpu_seconds']:.1f}s + "
        f"{copy['database_cpu_seconds'] or 0:.1f}s: {export_cpu / copy_cpu:.1f}x; load average "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
