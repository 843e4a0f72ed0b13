"""Snapshot jobs: queued, built by the job engine, recorded once, immutable; memory stays flat."""

import hashlib
import tracemalloc

import pytest

from simia_web.core.errors import Conflict, ValidationFailed
from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.exports.models import Snapshot
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import (
    export_write,
    snapshot_create,
    snapshot_file_name,
    snapshot_path,
)
from simia_web.jobs.models import JobStatus
from simia_web.jobs.services import job_cancel

from .data import TOOLS, conversation, domain_make, trajectory_make


@pytest.fixture
def eager(eager, settings, tmp_path):
    """Jobs run in-process, and build their files in a scratch folder."""
    settings.EXPORTS_DIR = tmp_path / "exports"


def test_snapshot_job_builds_an_immutable_checksummed_file(eager, users):
    shop = domain_make()
    for i in range(4):
        trajectory_make(shop, messages=conversation(f"W{i}"))
    trajectory_make(shop, status=TrajectoryStatus.RULES_FAILED)

    snapshot = snapshot_create(format="openai", filters={"domain": "shop"}, actor=users["curator"])
    snapshot.refresh_from_db()
    snapshot.job.refresh_from_db()

    assert snapshot.job.status == JobStatus.SUCCEEDED, snapshot.job.error
    assert snapshot.filters == {"domain": "shop", "status": "accepted"}
    assert snapshot.count == 4 and snapshot.refused_count == 0
    data = snapshot_path(snapshot).read_bytes()
    assert len(data) == snapshot.bytes
    assert hashlib.sha256(data).hexdigest() == snapshot.sha256
    assert snapshot.created_by == users["curator"] and snapshot.built_at is not None
    snapshot.count = 99
    with pytest.raises(Conflict, match="immutable"):
        snapshot.save()


def test_snapshot_of_bad_filters_is_refused_before_any_job(eager):
    with pytest.raises(ValidationFailed):
        snapshot_create(format="openai", filters={"min_score": "high"})
    with pytest.raises(ValidationFailed):
        snapshot_create(format="csv", filters={})
    assert not Snapshot.objects.exists()


def _bulk(domain, n: int) -> None:
    rows = [
        Trajectory(
            kind=TrajectoryKind.ROLLOUT,
            status=TrajectoryStatus.ACCEPTED,
            domain=domain,
            messages=conversation(f"W{i}"),
            tools=TOOLS,
        )
        for i in range(n)
    ]
    Trajectory.objects.bulk_create(rows, batch_size=1000)


def _peak(tmp_path, fmt: str) -> tuple[int, int]:
    tracemalloc.start()
    try:
        result = export_write(format=fmt, filters=export_filters_clean({}), path=tmp_path / f"x.{fmt}")
        return result.stats.count, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.django_db
@pytest.mark.parametrize("fmt", ["openai", "sharegpt", "tau2"])
def test_memory_stays_flat_as_rows_grow(tmp_path, fmt):
    shop = domain_make()
    _bulk(shop, 500)
    small_count, small_peak = _peak(tmp_path, fmt)
    _bulk(shop, 3500)
    large_count, large_peak = _peak(tmp_path, fmt)
    assert (small_count, large_count) == (500, 4000)
    # Eight times the rows, about the same peak: only one chunk is ever held in memory.
    assert large_peak < small_peak * 1.5 + 512 * 1024, (small_peak, large_peak)
    assert large_peak < 16 * 1024 * 1024


def test_a_failed_build_is_recorded_on_the_snapshot(eager, monkeypatch, client_for):
    from simia_web.exports import writers

    def broken(stream, queryset, stats, label, manifest):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(writers.WRITERS, "openai", broken)
    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()
    snapshot.job.refresh_from_db()
    assert snapshot.job.status == JobStatus.FAILED
    assert "disk on fire" in snapshot.error and not snapshot.sha256
    exports_dir = snapshot_path(snapshot)  # no file recorded: the folder itself
    assert not exports_dir.exists() or not list(exports_dir.iterdir())  # no partial file left behind
    response = client_for("annotator").get(f"/api/v1/snapshots/{snapshot.pk}/download/")
    assert response.status_code == 409


def _files(directory) -> list[str]:
    """Every file under the exports folder (by its path there), hidden temporary folders and files included."""
    return (
        sorted(str(p.relative_to(directory)) for p in directory.rglob("*") if p.is_file()) if directory.exists() else []
    )


def _writer_that(monkeypatch, *, after_rows: int, action):
    """Replace the openai writer by the real one whose stream runs `action` after some rows."""
    from simia_web.exports import writers

    real = writers.WRITERS["openai"]

    class Interrupting:
        def __init__(self, stream):
            self.stream, self.rows = stream, 0

        def write(self, data):
            if self.rows == after_rows:
                action()
            self.rows += 1
            return self.stream.write(data)

        def flush(self):
            self.stream.flush()

    monkeypatch.setitem(
        writers.WRITERS,
        "openai",
        lambda stream, qs, stats, label, manifest: real(Interrupting(stream), qs, stats, label, manifest),
    )


def test_a_build_failing_mid_write_leaves_no_file(eager, monkeypatch, settings):
    shop = domain_make()
    for i in range(5):
        trajectory_make(shop, messages=conversation(f"W{i}"))

    def fail():
        raise OSError("disk full")

    _writer_that(monkeypatch, after_rows=2, action=fail)
    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()
    snapshot.job.refresh_from_db()

    assert snapshot.job.status == JobStatus.FAILED
    assert "disk full" in snapshot.job.units.get().error
    assert "disk full" in snapshot.error and not snapshot.sha256 and not snapshot.file
    assert _files(settings.EXPORTS_DIR) == []


def _create_then_build(monkeypatch, before_build, **fields) -> Snapshot:
    """snapshot_create with the job held back until `before_build(snapshot)` has run."""
    from django.db import transaction

    queued = []
    with monkeypatch.context() as patch:
        patch.setattr(transaction, "on_commit", lambda fn, *args, **kwargs: queued.append(fn))
        snapshot = snapshot_create(**fields)
    before_build(snapshot)
    for fn in queued:
        fn()
    return Snapshot.objects.select_related("job").get(pk=snapshot.pk)


def test_a_job_cancelled_mid_write_leaves_no_file(eager, monkeypatch, settings):
    shop = domain_make()
    for i in range(5):
        trajectory_make(shop, messages=conversation(f"W{i}"))
    _writer_that(monkeypatch, after_rows=2, action=lambda: job_cancel(job=Snapshot.objects.get().job))

    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()
    snapshot.job.refresh_from_db()

    assert snapshot.job.status == JobStatus.CANCELLED
    assert not snapshot.sha256 and not snapshot.file
    assert _files(settings.EXPORTS_DIR) == []


def test_a_successful_build_leaves_exactly_one_checksummed_file(eager, monkeypatch, settings):
    shop = domain_make()
    for i in range(3):
        trajectory_make(shop, messages=conversation(f"W{i}"))

    def crash_debris(snapshot):  # what an earlier delivery killed mid-write left behind
        debris = settings.EXPORTS_DIR / f".snapshot-{snapshot.pk}.dead.part"
        debris.mkdir(parents=True)
        (debris / snapshot_file_name(snapshot)).write_bytes(b'{"messages": [')

    snapshot = _create_then_build(monkeypatch, crash_debris, format="openai", filters={})

    assert snapshot.job.status == JobStatus.SUCCEEDED, snapshot.job.error
    assert snapshot.is_built and snapshot.count == 3
    assert _files(settings.EXPORTS_DIR) == sorted(entry["path"] for entry in snapshot.files)
    assert snapshot.file == f"snapshot-{snapshot.pk}/snapshot-{snapshot.pk}-openai.jsonl"
    for entry in snapshot.files:
        data = (settings.EXPORTS_DIR / entry["path"]).read_bytes()
        assert len(data) == entry["bytes"] and hashlib.sha256(data).hexdigest() == entry["sha256"]
    assert snapshot.file_entry("data")["sha256"] == snapshot.sha256


def test_a_redelivered_merge_leaves_no_orphans(eager, monkeypatch, settings):
    from simia_web.exports import job_kinds

    shop = domain_make()
    trajectory_make(shop)
    deliveries = []
    real = job_kinds.snapshot_build

    def beside_two_more(**kwargs):
        # Two more deliveries of the merge unit, running beside the one the engine records: one recorded after it
        # (a duplicate), one never recorded because the unit was already done (the job engine discards its recorder).
        deliveries.extend(real(**kwargs) for _ in range(2))
        return real(**kwargs)

    monkeypatch.setattr(job_kinds, "snapshot_build", beside_two_more)
    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()
    built = snapshot_path(snapshot).read_bytes()
    duplicate, dropped = deliveries

    assert duplicate() == {"snapshot": snapshot.pk, "duplicate": True}
    dropped.discard()
    assert _files(settings.EXPORTS_DIR) == sorted(entry["path"] for entry in snapshot.files)  # no parts left either
    assert snapshot_path(snapshot).read_bytes() == built
