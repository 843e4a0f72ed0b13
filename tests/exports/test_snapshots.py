"""Snapshot jobs: queued, built by the job engine, recorded once, immutable; memory stays flat."""

import hashlib
import tracemalloc

import pytest
from django.core.exceptions import ValidationError

from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.exports.models import Snapshot
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import export_write, snapshot_create, snapshot_path
from simia_web.jobs.models import JobStatus

from .data import TOOLS, conversation, domain_make, trajectory_make


@pytest.fixture
def eager(settings, transactional_db, tmp_path):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EXPORTS_DIR = tmp_path / "exports"
    from simia_web.celery import app

    app.conf.task_always_eager = True
    yield
    app.conf.task_always_eager = False


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
    with pytest.raises(ValidationError, match="immutable"):
        snapshot.save()


def test_snapshot_of_bad_filters_is_refused_before_any_job(eager):
    with pytest.raises(ValidationError):
        snapshot_create(format="openai", filters={"min_score": "high"})
    with pytest.raises(ValidationError):
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
    from simia_web.exports import formats

    def broken(stream, queryset, stats, label):
        raise RuntimeError("disk on fire")

    monkeypatch.setitem(formats.WRITERS, "openai", broken)
    snapshot = snapshot_create(format="openai", filters={})
    snapshot.refresh_from_db()
    snapshot.job.refresh_from_db()
    assert snapshot.job.status == JobStatus.FAILED
    assert "disk on fire" in snapshot.error and not snapshot.sha256
    exports_dir = snapshot_path(snapshot)  # no file recorded: the folder itself
    assert not exports_dir.exists() or not list(exports_dir.iterdir())  # no partial file left behind
    response = client_for("annotator").get(f"/api/v1/snapshots/{snapshot.pk}/download/")
    assert response.status_code == 409
