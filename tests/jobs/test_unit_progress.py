"""Progress within a long unit: reported in the worker's memory, written by its heartbeat (forward only, on the units
it holds), shown on the job page and in the API in a fixed number of queries."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from simia_web.jobs import leases, unit_rows
from simia_web.jobs.models import Job, JobStatus, JobUnit, UnitStatus

RECORDS = "records written or left out"


@pytest.fixture
def job(db):
    return Job.objects.create(kind="export", status=JobStatus.RUNNING, stage="build")


def _unit(job, key: str, **fields) -> JobUnit:
    return JobUnit.objects.create(job=job, stage=job.stage, key=key, **fields)


def _progress(done: int, total: int = 100, what: str = "records", doing: str = "") -> dict:
    return {"done": done, "total": total, "what": what, "doing": doing}


def _beat() -> list[str]:
    """One heartbeat; the statements it made."""
    with CaptureQueriesContext(connection) as statements:
        leases.beat()
    return [query["sql"] for query in statements.captured_queries]


def _progress_of(unit: JobUnit) -> dict:
    unit.refresh_from_db()
    return unit.progress


def test_the_heartbeat_writes_what_its_units_report_once_and_only_when_it_changed(job):
    reporting, quiet = _unit(job, "a"), _unit(job, "b")
    with leases.unit_running(reporting.pk), leases.unit_running(quiet.pk):
        leases.unit_progress(reporting.pk, 10, 100, what="records", doing="Building snapshot 1")
        assert len(_beat()) == 2  # the leases, then the progress: one statement each for all the units
        assert _progress_of(reporting) == _progress(10, doing="Building snapshot 1")
        assert _progress_of(quiet) == {}

        leases.unit_progress(reporting.pk, 10, 100, what="records", doing="Building snapshot 1")
        assert len(_beat()) == 1  # the same progress again: only the leases

        leases.unit_progress(quiet.pk, 1, 5, what="calls")
        leases.unit_progress(reporting.pk, 20, 100, what="records")
        assert len(_beat()) == 2
    assert (_progress_of(reporting), _progress_of(quiet)) == (_progress(20), _progress(1, 5, "calls"))


def test_progress_written_never_goes_back(job):
    unit = _unit(job, "a", lease_holder=leases.lease_holder(), lease_until=timezone.now() + timedelta(minutes=1))
    JobUnit.objects.filter(pk=unit.pk).update(progress=_progress(50))
    with leases.unit_running(unit.pk):
        leases.unit_progress(unit.pk, 40, 100, what="records")
        leases.beat()
        assert _progress_of(unit) == _progress(50)
        leases.unit_progress(unit.pk, 60, 100, what="records")
        leases.beat()
    assert _progress_of(unit) == _progress(60)


def test_progress_is_written_only_on_pending_units_this_worker_holds(job):
    other_workers = _unit(job, "a", lease_holder="elsewhere:1", lease_until=timezone.now() + timedelta(minutes=1))
    ended = _unit(job, "b", status=UnitStatus.DONE)
    mine = _unit(job, "c")
    units = (other_workers, ended, mine)
    with leases.unit_running(other_workers.pk), leases.unit_running(ended.pk), leases.unit_running(mine.pk):
        for unit in units:
            leases.unit_progress(unit.pk, 5, 10, what="records")
        leases.beat()
    assert [_progress_of(unit) for unit in units] == [{}, {}, _progress(5, 10)]
    # Straight to the statement: a holder that is not this unit's writes nothing.
    assert unit_rows.units_progress_write({mine.pk: _progress(9, 10)}, holder="elsewhere:1") == 0


def test_a_unit_that_stopped_running_here_is_forgotten(job):
    unit = _unit(job, "a")
    with leases.unit_running(unit.pk):
        leases.unit_progress(unit.pk, 5, 10, what="records")
    leases.unit_progress(unit.pk, 6, 10, what="records")  # not running here: not kept
    assert not any("progress" in sql for sql in _beat())
    assert _progress_of(unit) == {}


def test_a_write_that_failed_is_made_at_the_next_beat(job, monkeypatch):
    unit = _unit(job, "a")
    real = unit_rows.units_progress_write

    def fails_once(progress, *, holder):
        monkeypatch.setattr(unit_rows, "units_progress_write", real)
        raise RuntimeError("lost the statement")

    monkeypatch.setattr(unit_rows, "units_progress_write", fails_once)
    with leases.unit_running(unit.pk):
        leases.unit_progress(unit.pk, 5, 10, what="records")
        leases.beat()
        assert _progress_of(unit) == {}
        leases.beat()
    assert _progress_of(unit) == _progress(5, 10)


# --- the job page and the API ---------------------------------------------------------------------------------------


def _running_unit(job, key: str, progress: dict, **fields) -> JobUnit:
    """A unit a live worker runs, with the progress its heartbeat wrote."""
    lease = {"lease_holder": "worker:1", "lease_until": timezone.now() + timedelta(minutes=1)}
    return _unit(job, key, progress=progress, **(lease | fields))


def test_the_job_page_and_api_show_a_running_units_progress(job, client_for):
    unit = _running_unit(job, "snapshot:12", _progress(340_000, 1_000_000, RECORDS, "Building snapshot 12"))
    _running_unit(job, "lapsed", _progress(7, 10), lease_until=timezone.now() - timedelta(seconds=1))  # worker gone
    _unit(job, "ended", status=UnitStatus.DONE, progress=_progress(10, 10))
    client = client_for("annotator")
    line = f"Building snapshot 12: 340,000 of 1,000,000 {RECORDS} (34%)"

    page = client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'id="unit-progress-{unit.pk}"' in page and line in page
    assert page.count('class="unitprogress"') == 1
    assert line in client.get(f"/jobs/{job.pk}/progress/").content.decode()  # the block the dashboard polls
    assert line in client.get(f"/jobs/{job.pk}/progress/", {"part": "head"}).content.decode()

    body = client.get(f"/api/v1/jobs/{job.pk}/").json()
    assert body["units_in_progress"] == [
        {
            "unit": unit.pk,
            "stage": "build",
            "key": "snapshot:12",
            "done": 340_000,
            "total": 1_000_000,
            "what": RECORDS,
            "doing": "Building snapshot 12",
        }
    ]

    job.status = JobStatus.CANCELLED
    job.save(update_fields=["status"])
    assert 'class="unitprogress"' not in client.get(f"/jobs/{job.pk}/").content.decode()
    assert client.get(f"/api/v1/jobs/{job.pk}/").json()["units_in_progress"] == []


def test_a_units_own_words_are_escaped_and_a_unit_without_total_or_label_says_its_stage(job, client_for):
    _running_unit(job, "<i>k</i>", _progress(1_234, 0, "<b>rows</b>", "<script>x()</script>"))
    _running_unit(job, "plain", _progress(5, 0, "calls"))
    page = client_for("annotator").get(f"/jobs/{job.pk}/").content.decode()
    assert "<script>x()" not in page and "<b>rows" not in page
    assert "&lt;script&gt;x()&lt;/script&gt;: 1,234 &lt;b&gt;rows&lt;/b&gt;" in page
    assert "build plain: 5 calls" in page  # no total: no "of", no percent, no bar
    assert page.count('class="unitprogress"') == 2 and page.count("<progress ") == 1


def test_the_job_page_and_api_read_progress_in_queries_that_do_not_grow_with_the_units(
    job, client_for, django_assert_num_queries
):
    client = client_for("annotator")
    _running_unit(job, "u0", _progress(1))
    pages = (f"/jobs/{job.pk}/", f"/jobs/{job.pk}/progress/?part=head", f"/api/v1/jobs/{job.pk}/")
    with CaptureQueriesContext(connection) as one_unit:
        for page in pages:
            client.get(page)
    for i in range(1, 8):
        _running_unit(job, f"u{i}", _progress(i))
    with django_assert_num_queries(len(one_unit.captured_queries)):
        responses = [client.get(page) for page in pages]
    assert responses[0].content.decode().count('class="unitprogress"') == 8
    assert len(responses[2].json()["units_in_progress"]) == 8
