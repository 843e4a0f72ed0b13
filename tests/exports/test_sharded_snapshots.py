"""A snapshot built as many ranges (parts any worker writes, merged in id order) holds exactly the files one range
writes: the same bytes for OpenAI JSONL, ShareGPT, τ² and the manifest, Parquet shards with the same rows."""

import datetime
import hashlib
import json
import time
import tracemalloc
import zipfile

import orjson
import pyarrow.parquet as pq
import pytest
from django.db import connection
from django.utils import timezone

from simia_web.accounts.models import User
from simia_web.catalog.models import Task
from simia_web.curation.models import Decision, JudgeVerdict, Review, Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.exports import job_kinds
from simia_web.exports.models import FileKind, Snapshot
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import ExportOptions, export_write, snapshot_create
from simia_web.jobs.models import JobStatus
from simia_web.jobs.services import job_cancel

from .data import TOOLS, conversation, domain_make, trajectory_make
from .test_gate_and_manifest import _broken

RECORDS = 10_000
FROZEN = datetime.datetime(2026, 12, 6, 10, 0, 0, tzinfo=datetime.UTC)


def dataset_make(n: int = RECORDS) -> None:
    """n trajectories in two domains, written in bulk (COPY on PostgreSQL): most accepted (one in 97 refused by the
    gate, one in 400 with a task whose τ² record is broken), with tasks and without, most with a standing decision
    and a verdict."""
    shop, bank = domain_make("shop"), domain_make("bank")
    tasks = [
        Task(
            domain=domain,
            external_id=f"t{i}",
            instruction=f"Ask where order W{i} is.",
            expected_outcome="The user learns it shipped.",
            expected_actions=[{"name": "get_order", "arguments": {"order_id": f"W{i}"}}],
        )
        for i, domain in enumerate([shop, bank] * 10)
    ]
    tasks.append(Task(domain=shop, instruction="", expected_actions=[{"arguments": "none"}]))  # τ² refuses it
    task_ids = [task.pk for task in Task.objects.bulk_create(tasks)]
    broken = ["empty_tool_name", "arguments_not_json", "result_without_call_id"]
    now = timezone.now()
    rows = []
    for i in range(n):
        messages = _broken(broken[i % 3]) if i % 97 == 5 else conversation(f"W{i}", extra_assistant=i % 11 == 0)
        rows.append(
            (
                TrajectoryKind.ROLLOUT if i % 4 else TrajectoryKind.AMPLIFIED,
                TrajectoryStatus.REJECTED if i % 250 == 3 else TrajectoryStatus.ACCEPTED,
                (bank if i % 3 == 0 else shop).pk,
                task_ids[-1] if i % 400 == 7 else (task_ids[i % 20] if i % 2 else None),
                messages,
                TOOLS,
                i % 5 != 0,
                (i % 100) / 100,
                "final_answer",
                {"stage": "rollout", "model": f"m{i % 3}", "prompt_version": "v1"},
                now,
                now,
            )
        )
    _insert(Trajectory, TRAJECTORY_COLUMNS, rows)
    ids = list(Trajectory.objects.order_by("pk").values_list("pk", flat=True))
    reviewer = User.objects.create(username="sharded-reviewer")
    reviews = [(pk, reviewer.pk, Decision.ACCEPT, 1, i % 2 == 0, now) for i, pk in enumerate(ids) if i % 7]
    _insert(Review, ("trajectory_id", "reviewer_id", "decision", "trajectory_version", "bulk", "created_at"), reviews)
    verdicts = [
        (pk, i % 5 != 0, (i % 100) / 100 + 0.001, {"policy": i % 10}, 1, now) for i, pk in enumerate(ids) if i % 9
    ]
    columns = ("trajectory_id", "passed", "score", "scores", "trajectory_version", "created_at")
    _insert(JudgeVerdict, columns, verdicts)
    if connection.vendor == "postgresql":
        # The statistics autovacuum gathers after a load (without them the planner takes the tables for empty).
        with connection.cursor() as cursor:
            for model in (Trajectory, Review, JudgeVerdict):
                cursor.execute(f"ANALYZE {model._meta.db_table}")


TRAJECTORY_COLUMNS = (
    "kind",
    "status",
    "domain_id",
    "task_id",
    "messages",
    "tools",
    "judge_passed",
    "judge_score",
    "termination_reason",
    "provenance",
    "created_at",
    "updated_at",
)


def _insert(model, columns: tuple[str, ...], rows: list[tuple]) -> None:
    """Rows of `columns` into the model's table: COPY on PostgreSQL (bench/copy_rows), bulk_create elsewhere."""
    if connection.vendor == "postgresql":
        from bench.copy_rows import TableRows

        json_columns = [i for i, name in enumerate(columns) if name in ("messages", "tools", "provenance", "scores")]

        def as_copied(row):
            return tuple(orjson.dumps(value).decode() if i in json_columns else value for i, value in enumerate(row))

        with connection.cursor() as cursor:
            TableRows(model, columns).copy(cursor, map(as_copied, rows))
        return
    model.objects.bulk_create([model(**dict(zip(columns, row, strict=True))) for row in rows], batch_size=1000)


class FrozenTime:
    """What zipfile reads of the time module: the entries' dates are this moment's."""

    @staticmethod
    def time() -> float:
        return FROZEN.timestamp()

    @staticmethod
    def localtime(seconds=None):
        return time.gmtime(FROZEN.timestamp())


@pytest.fixture
def frozen(monkeypatch):
    """The moments a build writes in its files (the τ² timestamp, the zip entries' dates) held still."""
    from simia_web.exports import writers

    monkeypatch.setattr(zipfile, "time", FrozenTime)
    monkeypatch.setattr(writers.timezone, "now", lambda: FROZEN)


def digests(folder) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def parquet_rows(folder) -> list[dict]:
    return [row for path in sorted((folder / "data").glob("*.parquet")) for row in pq.read_table(path).to_pylist()]


FORMATS = ("openai", "sharegpt", "tau2", "parquet")
PER_RANGE = 2_400  # 10k records: 4 ranges of 2,400 and one of the rest


class MergePeak:
    """exports.parts.parts_merge as services call it, with the largest memory any one merge held (tracemalloc)."""

    def __init__(self, monkeypatch):
        from simia_web.exports import services

        self.peaks: list[int] = []
        self.largest_parts: list[int] = []  # the bytes of the largest part (its records and manifest) of each merge
        self.real = services.parts_merge
        monkeypatch.setattr(services, "parts_merge", self)

    def __call__(self, **kwargs):
        files = [[path for path in part.folder.rglob("*") if path.is_file()] for part in kwargs["parts"]]
        self.largest_parts.append(max(sum(path.stat().st_size for path in part) for part in files))
        tracemalloc.start()
        try:
            return self.real(**kwargs)
        finally:
            self.peaks.append(tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()


@pytest.mark.django_db
def test_ranges_merge_into_the_bytes_one_range_writes(frozen, monkeypatch, settings, tmp_path):
    dataset_make()
    merges = MergePeak(monkeypatch)
    filters = export_filters_clean({})
    for fmt in FORMATS:
        built = {}
        for how, per_range in (("one range", RECORDS), ("ranges", PER_RANGE)):
            settings.EXPORT_RANGE_RECORDS = per_range
            folder = tmp_path / fmt / how.replace(" ", "-") / "export"  # Parquet's file set is this folder
            path = folder if fmt == "parquet" else folder / f"data.{fmt}"
            # The card on one format: its facts are merged as the counts are, whatever the format.
            options = ExportOptions(card=fmt == "openai", shard_rows=1_500)
            built[how] = export_write(format=fmt, filters=filters, path=path, options=options), folder
        (one, one_folder), (ranges, ranges_folder) = built["one range"], built["ranges"]

        assert (ranges.stats.count, ranges.stats.refused_count) == (one.stats.count, one.stats.refused_count)
        assert one.stats.count > 9_000 and one.stats.refused_count > 100, fmt
        one_files, ranges_files = digests(one_folder), digests(ranges_folder)
        report = one.file(FileKind.REPORT).name
        if fmt == "parquet":
            assert parquet_rows(ranges_folder) == parquet_rows(one_folder)
            assert (len(ranges.data_files), len(one.data_files)) == (4 * 2 + 1, 7)  # shards of 1,500 rows at most
            manifest = one.file(FileKind.MANIFEST).name
            assert ranges_files[manifest] == one_files[manifest]
        else:
            assert {name: sha for name, sha in ranges_files.items() if name != report} == {
                name: sha for name, sha in one_files.items() if name != report
            }, fmt
            assert ranges.sha256 == one.sha256
        # The merge streams: it holds a block of a part at a time, never a whole part (Parquet's are links).
        peak, largest = merges.peaks[-1], merges.largest_parts[-1]
        assert peak < 1.5 * 2**20 and (fmt == "parquet" or peak < largest / 2), (fmt, peak, largest)
        one_report, ranges_report = (json.loads((f / report).read_bytes()) for f in (one_folder, ranges_folder))
        for name in ("written_at", "files", "data_sha256"):
            one_report.pop(name), ranges_report.pop(name)
        assert ranges_report == one_report, fmt


# --- The job: parts on any worker, the merge, redelivery, failure and cancel ------------------------------------


@pytest.fixture
def small(eager, settings, tmp_path):
    """Jobs run in-process into a scratch folder; 12 accepted trajectories (one the gate refuses) in ranges of 5."""
    settings.EXPORTS_DIR = tmp_path / "exports"
    settings.EXPORT_RANGE_RECORDS = 5
    shop = domain_make()
    for i in range(12):
        trajectory_make(shop, messages=_broken("arguments_not_json") if i == 6 else conversation(f"W{i}"))
    trajectory_make(shop, status=TrajectoryStatus.REJECTED)


def _files(directory) -> list[str]:
    return (
        sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()) if directory.exists() else []
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_snapshot_job_builds_its_ranges_as_units_and_merges_them(small, frozen, settings, tmp_path, fmt):
    snapshot = snapshot_create(format=fmt, filters={})
    snapshot.refresh_from_db()

    assert snapshot.job.status == JobStatus.SUCCEEDED, snapshot.job.error
    parts = list(snapshot.job.units.filter(stage=job_kinds.BUILD).order_by("key"))
    assert [(unit.params["low"] is None, unit.result["count"], unit.result["refused"]) for unit in parts] == [
        (True, 5, 0),
        (False, 4, 1),
        (False, 2, 0),
    ]
    merge = snapshot.job.units.get(stage=job_kinds.MERGE)
    assert merge.result == {"snapshot": snapshot.pk, "count": 11, "refused": 1, "sha256": snapshot.sha256}
    assert (snapshot.count, snapshot.refused_count) == (11, 1)
    # No parts left, only the snapshot's files.
    assert _files(settings.EXPORTS_DIR) == sorted(entry["path"] for entry in snapshot.files)

    settings.EXPORT_RANGE_RECORDS = 1_000
    folder = tmp_path / "one" / "export"
    path = folder if fmt == "parquet" else folder / f"data.{fmt}"
    options = ExportOptions(label=f"simia_snapshot_{snapshot.pk}", card=False)
    one = export_write(format=fmt, filters=export_filters_clean({}), path=path, options=options)
    built = settings.EXPORTS_DIR / f"snapshot-{snapshot.pk}"
    manifest = (built / snapshot.file_entry(FileKind.MANIFEST)["name"]).read_bytes()
    assert manifest == (folder / one.file(FileKind.MANIFEST).name).read_bytes()
    if fmt == "parquet":
        assert parquet_rows(built) == parquet_rows(folder)
    else:
        assert snapshot.sha256 == one.sha256


def test_a_redelivered_part_rewrites_its_own_part_once(small, monkeypatch, settings):
    from simia_web.exports import services as export_services

    deliveries = []
    real = job_kinds.snapshot_part_build

    def beside_another(**kwargs):
        # Another delivery of the unit, running beside the one the engine records: the engine discards it.
        if kwargs["index"] == 1:
            deliveries.append(real(**kwargs))
        return real(**kwargs)

    monkeypatch.setattr(job_kinds, "snapshot_part_build", beside_another)
    recorded = []
    real_recorder = export_services.PartRecorder.__call__

    def recording(self):
        recorded.append(self.index)
        return real_recorder(self)

    monkeypatch.setattr(export_services.PartRecorder, "__call__", recording)
    # A delivery whose commit never came left part 1 in place: the recorded one replaces it.
    stale = export_services.snapshot_parts_folder(Snapshot(pk=_next_snapshot_id())) / "part-00001"
    stale.mkdir(parents=True)
    (stale / "records").write_bytes(b"stale")

    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()

    assert snapshot.job.status == JobStatus.SUCCEEDED and snapshot.count == 11
    assert recorded == [0, 1, 2]  # each part put in place once
    (other,) = deliveries
    other.discard()
    assert _files(settings.EXPORTS_DIR) == sorted(entry["path"] for entry in snapshot.files)
    data = (settings.EXPORTS_DIR / snapshot.file).read_bytes()
    assert b"stale" not in data and len(data.splitlines()) == 11


def _next_snapshot_id() -> int:
    from django.db import connection as db

    with db.cursor() as cursor:
        if db.vendor == "postgresql":
            cursor.execute("SELECT last_value + CASE WHEN is_called THEN 1 ELSE 0 END FROM exports_snapshot_id_seq")
            return cursor.fetchone()[0]
    return (Snapshot.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1


def test_a_failed_part_fails_the_snapshot_and_leaves_no_parts(small, monkeypatch, settings):
    from simia_web.exports import writers

    real = writers.WRITERS["openai"]

    def failing_on_the_second(stream, queryset, stats, label, manifest):
        if queryset.filter(pk=Trajectory.objects.order_by("pk")[6].pk).exists():
            raise OSError("disk full")
        return real(stream, queryset, stats, label, manifest)

    monkeypatch.setitem(writers.WRITERS, "openai", failing_on_the_second)
    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()

    assert snapshot.job.status == JobStatus.FAILED and not snapshot.sha256
    assert "disk full" in snapshot.error
    merge = snapshot.job.units.get(stage=job_kinds.MERGE)
    assert "part(s) 2 of 3 were not built" in merge.error
    assert _files(settings.EXPORTS_DIR) == []


def test_a_cancelled_snapshot_leaves_no_parts(small, monkeypatch, settings):
    real = job_kinds.snapshot_part_build

    def cancelling_after_the_first(**kwargs):
        built = real(**kwargs)
        if kwargs["index"] == 0:
            from django.db import transaction

            transaction.on_commit(lambda: job_cancel(job=Snapshot.objects.get().job))
        return built

    monkeypatch.setattr(job_kinds, "snapshot_part_build", cancelling_after_the_first)
    # What deliveries a worker's death cut short left: a part's temporary folder, and a merge's.
    coming = Snapshot(pk=_next_snapshot_id())
    for debris in (
        export_services_parts(coming) / ".part-00001.dead.tmp",
        settings.EXPORTS_DIR / f".snapshot-{coming.pk}.dead.part",
    ):
        debris.mkdir(parents=True)
        (debris / "records").write_bytes(b"cut short")
    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()

    assert snapshot.job.status == JobStatus.CANCELLED and not snapshot.sha256 and snapshot.pk == coming.pk
    assert _files(settings.EXPORTS_DIR) == []
    assert not export_services_parts(snapshot).exists()


def export_services_parts(snapshot):
    from simia_web.exports.services import snapshot_parts_folder

    return snapshot_parts_folder(snapshot)
