"""A snapshot's build says how far it has got: records handled of those it reads, while it runs, on its job's page."""

import threading

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.curation.models import TrajectoryStatus
from simia_web.exports import job_kinds, records
from simia_web.exports.models import Snapshot
from simia_web.exports.services import snapshot_create
from simia_web.jobs import leases, services
from simia_web.jobs.models import JobStatus, UnitStatus

from .data import conversation, domain_make, trajectory_make
from .test_gate_and_manifest import _broken

# A wait that only a broken test reaches: every wait below ends on an event the other thread sets.
STUCK = 60


def _trajectories(good: int, refused: int) -> None:
    shop = domain_make()
    for i in range(good):
        trajectory_make(shop, messages=conversation(f"W{i}"))
    for _ in range(refused):
        trajectory_make(shop, messages=_broken("result_without_call_id"))
    trajectory_make(shop, status=TrajectoryStatus.REJECTED)  # not in the snapshot: not counted


def _reports_kept(monkeypatch) -> list[tuple]:
    """What the build unit reports, as (unit, done, total, what, doing), passed on to the worker's heartbeat."""
    reports = []

    def kept(unit_id, done, total, *, what, doing=""):
        reports.append((unit_id, done, total, what, doing))
        leases.unit_progress(unit_id, done, total, what=what, doing=doing)

    monkeypatch.setattr(job_kinds, "unit_progress", kept)
    return reports


@pytest.mark.parametrize("fmt", ["openai", "parquet"])
def test_a_build_reports_records_handled_up_to_its_total(eager, monkeypatch, settings, tmp_path, fmt):
    settings.EXPORTS_DIR = tmp_path / "exports"
    monkeypatch.setattr(records, "PROGRESS_EVERY", 2)
    reports = _reports_kept(monkeypatch)
    _trajectories(good=5, refused=2)

    snapshot = snapshot_create(format=fmt, filters={})
    snapshot.refresh_from_db()

    assert snapshot.job.status == JobStatus.SUCCEEDED and (snapshot.count, snapshot.refused_count) == (5, 2)
    unit, merge = snapshot.job.units.get(stage=job_kinds.BUILD), snapshot.job.units.get(stage=job_kinds.MERGE)
    built = [report for report in reports if report[0] == unit.pk]
    assert [(done, total) for _, done, total, _, _ in built] == [(0, 7), (2, 7), (4, 7), (6, 7), (7, 7)]
    assert {(what, doing) for _, _, _, what, doing in built} == {
        (job_kinds.BUILD_COUNTS, f"Building snapshot {snapshot.pk}")
    }
    assert [report[1:3] for report in reports if report[0] == merge.pk] == [(0, 1), (1, 1)]
    assert unit.result == {"snapshot": snapshot.pk, "part": 0, "count": 5, "refused": 2}
    assert merge.result == {"snapshot": snapshot.pk, "count": 5, "refused": 2, "sha256": snapshot.sha256}


@pytest.fixture
def paused_build(transactional_db, monkeypatch, settings, tmp_path):
    """A snapshot's build unit (its one part) run by the job engine on a thread of its own, as a worker's thread runs
    it, paused inside its read transaction once it has reported 4 records: (snapshot, unit id, units sent, paused,
    resume, thread)."""
    settings.EXPORTS_DIR = tmp_path / "exports"
    monkeypatch.setattr(records, "PROGRESS_EVERY", 2)
    units_sent: list[int] = []
    monkeypatch.setattr(services, "_enqueue_units", lambda unit_ids, **kwargs: units_sent.extend(unit_ids))
    monkeypatch.setattr(services, "task_send", lambda *args, **kwargs: None)  # the job's start message
    paused, resume = threading.Event(), threading.Event()

    def pausing(unit_id, done, total, *, what, doing=""):
        leases.unit_progress(unit_id, done, total, what=what, doing=doing)
        if done == 4:
            paused.set()
            resume.wait(STUCK)

    monkeypatch.setattr(job_kinds, "unit_progress", pausing)
    _trajectories(good=5, refused=2)
    snapshot = snapshot_create(format="openai", filters={})
    services.job_start(job_id=snapshot.job_id)
    (unit_id,) = units_sent
    failures: list[BaseException] = []

    def work():
        try:
            services.unit_execute(unit_id=unit_id)
        except BaseException as exc:
            failures.append(exc)
        finally:
            connection.close()

    thread = threading.Thread(target=work)
    thread.start()
    yield snapshot, unit_id, units_sent, paused, resume, thread
    resume.set()
    thread.join(STUCK)
    assert not failures


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="a build's read transaction is PostgreSQL's; concurrent threads need it"
)
def test_the_job_page_shows_a_build_in_progress_written_by_the_heartbeat(paused_build, client_for):
    snapshot, unit_id, units_sent, paused, resume, thread = paused_build
    assert paused.wait(STUCK), "the build never reported 4 records"
    client = client_for("annotator")
    line = f"Building snapshot {snapshot.pk}: 4 of 7 {job_kinds.BUILD_COUNTS} (57%)"

    assert line not in client.get(f"/jobs/{snapshot.job_id}/").content.decode()  # reported, not yet written
    leases.beat()  # this process's heartbeat, on a connection of its own: the build's transaction is still open
    assert line in client.get(f"/jobs/{snapshot.job_id}/progress/", {"part": "head"}).content.decode()
    (in_progress,) = client.get(f"/api/v1/jobs/{snapshot.job_id}/").json()["units_in_progress"]
    assert (in_progress["unit"], in_progress["done"], in_progress["total"]) == (unit_id, 4, 7)

    resume.set()
    thread.join(STUCK)
    assert not thread.is_alive()
    (merge_id,) = units_sent[1:]  # the merge, planned once the part was written
    services.unit_execute(unit_id=merge_id)
    snapshot = Snapshot.objects.select_related("job").get(pk=snapshot.pk)
    assert snapshot.job.status == JobStatus.SUCCEEDED and snapshot.count == 5
    assert snapshot.job.units.get(pk=unit_id).status == UnitStatus.DONE
    assert 'class="unitprogress"' not in client.get(f"/jobs/{snapshot.job_id}/").content.decode()
    # The unit ended: this process forgot its progress, and its heartbeat writes none.
    with CaptureQueriesContext(connection) as beat:
        leases.beat()
    assert beat.captured_queries == []
