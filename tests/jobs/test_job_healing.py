"""Units held by leases, runs that wait out outages, and the watchdog's rule for lost messages, without
an LLM or a worker. (Servers killed mid-job are in tests/faults.)"""

from datetime import timedelta

import psycopg.errors
import pytest
from django import db
from django.utils import timezone

from simia_web.jobs import leases, services, unit_rows
from simia_web.jobs.models import Job, JobStatus, JobUnit, UnitStatus, WatchdogTurn
from simia_web.llm.models import LLMCall
from simia_web.llm.services import llm_call_record

from .test_job_engine import OneUnitPipeline, RecordingWriter


def _outage() -> Exception:
    """What a worker thread gets from Django while PostgreSQL restarts."""
    try:
        try:
            raise psycopg.errors.AdminShutdown("terminating connection due to administrator command")
        except psycopg.Error as exc:
            raise db.OperationalError(str(exc)) from exc
    except db.OperationalError as wrapped:
        return wrapped


@pytest.fixture
def job(db):
    return Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")


@pytest.fixture
def unit(job):
    return JobUnit.objects.create(job=job, stage="rollout", key="u1", dispatched_at=timezone.now())


@pytest.fixture
def no_pauses(monkeypatch):
    monkeypatch.setattr("simia_web.core.outages.time.sleep", lambda seconds: None)


def _run(monkeypatch, unit, pipeline) -> JobUnit:
    monkeypatch.setattr(services, "job_kind_for", lambda kind: pipeline)
    monkeypatch.setattr(services, "job_advance", lambda **kwargs: None)
    services.unit_execute(unit_id=unit.pk)
    unit.refresh_from_db()
    return unit


def _lease(unit, holder: str, seconds: float) -> None:
    until = timezone.now() + timedelta(seconds=seconds)
    JobUnit.objects.filter(pk=unit.pk).update(lease_holder=holder, lease_until=until)


def test_a_unit_another_worker_holds_is_left_to_it(monkeypatch, unit):
    _lease(unit, "elsewhere:1", 60)
    writer = RecordingWriter()
    unit = _run(monkeypatch, unit, OneUnitPipeline(writer))
    assert (writer.called, unit.status, unit.attempts) == (0, UnitStatus.PENDING, 0)


def test_a_lease_that_ran_out_is_taken_over_and_cleared_when_the_unit_ends(monkeypatch, unit):
    _lease(unit, "dead-worker:1", -1)
    unit = _run(monkeypatch, unit, OneUnitPipeline(RecordingWriter()))
    assert (unit.status, unit.attempts, unit.lease_holder, unit.lease_until) == (UnitStatus.DONE, 1, "", None)


def test_a_second_message_for_a_unit_this_worker_runs_is_ignored(monkeypatch, unit):
    writer = RecordingWriter()
    with leases.unit_running(unit.pk) as first:
        assert first
        unit = _run(monkeypatch, unit, OneUnitPipeline(writer))
    assert (writer.called, unit.status) == (0, UnitStatus.PENDING)


class OutageOnce:
    """A pipeline whose first run makes an LLM call and then loses the database; the second run succeeds."""

    kind = "rollout"

    def __init__(self, *, in_writer: bool = False):
        self.runs, self.in_writer = 0, in_writer
        self.writer = RecordingWriter()

    def run(self, job, unit):
        self.runs += 1
        llm_call_record(LLMCall(stage="agent", model="m", job_id=job.pk, request_hash=str(self.runs), request={}))
        if self.runs == 1 and not self.in_writer:
            raise _outage()
        if self.runs == 1:
            return self._failing_writer
        return self.writer

    def _failing_writer(self):
        raise _outage()


def test_an_outage_mid_run_is_waited_out_and_spends_no_attempt(monkeypatch, unit, no_pauses):
    pipeline = OutageOnce()
    unit = _run(monkeypatch, unit, pipeline)
    assert (pipeline.runs, pipeline.writer.called, unit.status, unit.attempts) == (2, 1, UnitStatus.DONE, 1)
    assert unit.error == ""
    assert LLMCall.objects.filter(job=unit.job).count() == 2  # the interrupted run's call is recorded too


def test_an_outage_while_writing_the_result_runs_the_unit_again(monkeypatch, unit, no_pauses):
    pipeline = OutageOnce(in_writer=True)
    unit = _run(monkeypatch, unit, pipeline)
    assert (pipeline.runs, unit.status, unit.attempts, unit.error) == (2, UnitStatus.DONE, 1, "")
    assert LLMCall.objects.filter(job=unit.job).count() == 2


def test_the_heartbeat_leases_the_units_this_worker_holds_and_no_other_workers(job):
    mine, theirs = (JobUnit.objects.create(job=job, stage="rollout", key=f"u{i}") for i in range(2))
    _lease(theirs, "elsewhere:1", 60)
    for held in (mine, theirs):
        leases.unit_received(held.pk)
    try:
        leases.beat()
    finally:
        for held in (mine, theirs):
            leases.unit_let_go(held.pk)
    mine.refresh_from_db()
    theirs.refresh_from_db()
    assert mine.lease_holder == leases.lease_holder() and mine.lease_until > timezone.now()
    assert theirs.lease_holder == "elsewhere:1"
    assert leases.held_units() == []


@pytest.fixture
def watchdog(monkeypatch, settings):
    """The watchdog's look with its sends collected, a fresh turn each call, and the probes that came back
    through the queue given: (sent, seen) as seconds ago."""
    settings.SIMIA_UNIT_HEARTBEAT_SECONDS = 5
    sent, started, probes = [], [], []
    monkeypatch.setattr(services, "_enqueue_units", sent.extend)
    sends = {services.JOB_START: started, services.QUEUE_PROBE: probes}
    monkeypatch.setattr(services, "task_send", lambda name, args: sends[name].append(args[0]))

    def look(*, probes_back: tuple[tuple[float, float], ...] = ()) -> list[int]:
        now = timezone.now().timestamp()
        WatchdogTurn.objects.all().delete()
        WatchdogTurn.objects.create(
            name="jobs",
            looked_at=timezone.now() - timedelta(minutes=1),
            probes=[[now - sent_ago, now - seen_ago] for sent_ago, seen_ago in probes_back],
        )
        sent.clear()
        probes.clear()
        services.jobs_heal()
        return sorted(sent)

    look.started, look.probes = started, probes
    return look


def _units(job, count: int, *, sent_ago: float) -> list[JobUnit]:
    at = timezone.now() - timedelta(seconds=sent_ago)
    return [JobUnit.objects.create(job=job, stage="rollout", key=f"k{i}", dispatched_at=at) for i in range(count)]


def test_units_sent_before_a_probe_that_came_back_and_still_unheld_are_lost(job, watchdog):
    lost = _units(job, 3, sent_ago=60)
    assert watchdog(probes_back=((30, 20),)) == [u.pk for u in lost]


def test_units_queued_behind_others_are_not_sent_again(job, watchdog):
    _units(job, 3, sent_ago=60)
    assert watchdog() == []  # no probe has come back through the queue: they may be behind thousands
    assert watchdog.probes  # one is on its way
    assert watchdog(probes_back=((90, 20),)) == []  # the probe that came back was sent before them
    # Came back too recently: a worker that took the units just before it may not have leased them yet.
    assert watchdog(probes_back=((30, 2),)) == []


def test_held_units_are_not_sent_again_and_a_dead_workers_are(job, watchdog):
    alive, dead = _units(job, 2, sent_ago=600)
    _lease(alive, "alive:1", 15)
    JobUnit.objects.filter(pk=alive.pk).update(started_at=timezone.now())  # running there
    _lease(dead, "killed:2", -1)
    assert watchdog() == [dead.pk]  # taken from the queue by a worker that stopped renewing: lost with it


def test_sending_again_clears_a_lease_that_ran_out_and_no_live_one(job):
    alive, dead = _units(job, 2, sent_ago=600)
    _lease(alive, "alive:1", 15)
    _lease(dead, "killed:2", -1)
    unit_rows.units_mark_dispatched([alive.pk, dead.pk])
    alive.refresh_from_db()
    dead.refresh_from_db()
    assert alive.lease_holder == "alive:1" and alive.dispatched_at < timezone.now() - timedelta(seconds=500)
    assert (dead.lease_holder, dead.lease_until) == ("", None) and dead.dispatched_at > alive.dispatched_at


def test_one_worker_looks_each_period(job):
    assert unit_rows.watchdog_turn_take(holder="a:1", period=5)
    assert unit_rows.watchdog_turn_take(holder="b:2", period=5) is None
    WatchdogTurn.objects.update(looked_at=timezone.now() - timedelta(seconds=6))
    assert unit_rows.watchdog_turn_take(holder="b:2", period=5).looked_by == "b:2"


def test_a_probe_back_from_the_queue_is_noted_and_the_latest_kept(db):
    WatchdogTurn.objects.create(name="jobs", looked_at=timezone.now())
    for sent_at in range(12):
        services.queue_probe_seen(sent_at=float(sent_at))
    probes = WatchdogTurn.objects.get().probes
    assert [sent for sent, _ in probes] == [float(n) for n in range(4, 12)]
    assert all(seen > 1e9 for _, seen in probes)


def test_a_stage_left_without_pending_units_is_moved_on_and_a_lost_start_is_sent_again(db, watchdog, monkeypatch):
    finished = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    JobUnit.objects.create(job=finished, stage="rollout", key="done", status=UnitStatus.DONE)
    queued = Job.objects.create(kind="rollout")
    Job.objects.filter(pk=queued.pk).update(created_at=timezone.now() - timedelta(minutes=5))
    Job.objects.create(kind="rollout")  # queued just now: its start message is on its way
    advanced = []
    monkeypatch.setattr(services, "job_advance", lambda **kwargs: advanced.append(kwargs))
    watchdog(probes_back=((30, 20),))
    assert advanced == [{"job_id": finished.pk, "stage": "rollout"}]
    assert watchdog.started == [queued.pk]


def test_a_unit_leased_and_never_started_is_taken_back_logged_counted_and_sent_again(job, watchdog, settings, caplog):
    from simia_web.operations.selectors import metric_counts

    settings.SIMIA_UNIT_STALL_SECONDS = 120
    wedged, running, waiting = _units(job, 3, sent_ago=600)
    JobUnit.objects.filter(pk=waiting.pk).update(dispatched_at=timezone.now() - timedelta(seconds=60))
    JobUnit.objects.filter(pk=running.pk).update(started_at=timezone.now() - timedelta(seconds=300))
    for unit in (wedged, running, waiting):
        _lease(unit, "wedged:7", 15)
    with caplog.at_level("WARNING", logger="simia_web.jobs.services"):
        assert watchdog() == [wedged.pk]  # running: started; waiting: within the setting
    assert "wedged:7" in caplog.text and f"unit {wedged.pk}" in caplog.text
    wedged.refresh_from_db()
    assert (wedged.lease_holder, wedged.lease_until, wedged.lease_taken_from) == ("", None, "wedged:7")
    counted = dict((labels["kind"], n) for labels, n in metric_counts()["job_unit_leases_taken_back"])
    assert counted == {"rollout": 1}


def test_a_lease_taken_back_is_renewed_no_more_by_its_holder_but_any_worker_may_run_the_unit(job):
    unit = _units(job, 1, sent_ago=600)[0]
    JobUnit.objects.filter(pk=unit.pk).update(lease_taken_from="wedged:7")
    assert unit_rows.units_lease_renew([unit.pk], holder="wedged:7", lease_seconds=15) == 0
    assert unit_rows.units_lease_renew([unit.pk], holder="other:8", lease_seconds=15) == 1
    JobUnit.objects.filter(pk=unit.pk).update(lease_holder="", lease_until=None)
    claimed = unit_rows.unit_claim_for_run(unit.pk, holder="wedged:7", lease_seconds=15)
    assert claimed is not None
    unit.refresh_from_db()
    assert (unit.lease_holder, unit.lease_taken_from, unit.attempts) == ("wedged:7", "", 1)


def test_a_pool_process_takes_over_the_lease_its_parent_took_and_no_one_elses(job):
    unit = _units(job, 1, sent_ago=1)[0]
    _lease(unit, "host:100", 15)  # the prefork parent that took the message
    assert unit_rows.unit_claim_for_run(unit.pk, holder="host:200", lease_seconds=15, parent="host:999") is None
    assert unit_rows.unit_claim_for_run(unit.pk, holder="host:101", lease_seconds=15, parent="host:100") is not None
    unit.refresh_from_db()
    assert unit.lease_holder == "host:101"


def test_a_parent_lets_go_of_units_its_children_run_or_that_ended_and_keeps_those_still_waiting(job):
    waiting, in_child, ended = _units(job, 3, sent_ago=1)
    _lease(in_child, "child:2", 15)
    JobUnit.objects.filter(pk=ended.pk).update(status=UnitStatus.DONE)
    for unit in (waiting, in_child, ended):
        leases.unit_received(unit.pk)
    try:
        leases.beat()
        assert leases.held_units() == [waiting.pk]
    finally:
        for unit in (waiting, in_child, ended):
            leases.unit_let_go(unit.pk)  # Celery's task_postrun, where it fires in this process: harmless twice
    assert leases.held_units() == []
    waiting.refresh_from_db()
    assert waiting.lease_holder == leases.lease_holder()
