"""The job engine's exactly-once contract with job kinds, without any LLM."""

import pytest

from simia_web.jobs import services
from simia_web.jobs.models import Job, JobStatus, JobUnit, UnitStatus


class RecordingWriter:
    def __init__(self, *, fail=False):
        self.fail, self.called, self.discarded = fail, 0, 0

    def __call__(self):
        self.called += 1
        if self.fail:
            raise RuntimeError("disk full")
        return {"ok": True}

    def discard(self):
        self.discarded += 1


class OneUnitPipeline:
    kind = "rollout"

    def __init__(self, writer, before_commit=lambda unit: None):
        self.writer, self.before_commit = writer, before_commit

    def run(self, job, unit):
        self.before_commit(unit)
        return self.writer


@pytest.fixture
def unit(db):
    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    return JobUnit.objects.create(job=job, stage="rollout", key="u1")


@pytest.fixture
def redis_queue(settings):
    """The Redis client and the default queue's name, emptied before and after the test."""
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    import redis

    from simia_web.celery import app

    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    queue = app.conf.task_default_queue
    client.delete(queue, "unacked", "unacked_index")
    yield client, queue
    client.delete(queue, "unacked", "unacked_index")


def _run(monkeypatch, unit, pipeline):
    monkeypatch.setattr(services, "job_kind_for", lambda kind: pipeline)
    monkeypatch.setattr(services, "job_advance", lambda **kwargs: None)
    services.unit_execute(unit_id=unit.pk)
    unit.refresh_from_db()


def test_writer_runs_once_and_marks_the_unit_done(monkeypatch, unit):
    writer = RecordingWriter()
    _run(monkeypatch, unit, OneUnitPipeline(writer))
    assert (writer.called, writer.discarded, unit.status, unit.result) == (1, 0, UnitStatus.DONE, {"ok": True})
    assert unit.started_at <= unit.finished_at and unit.error == ""
    _run(monkeypatch, unit, OneUnitPipeline(writer))  # a redelivery of a finished unit does nothing
    assert writer.called == 1 and unit.attempts == 1


def test_a_writer_that_will_not_run_is_discarded(monkeypatch, unit):
    """Another delivery finished the unit while this one did its slow work."""
    writer = RecordingWriter()
    finish_elsewhere = lambda u: JobUnit.objects.filter(pk=u.pk).update(status=UnitStatus.DONE)  # noqa: E731
    _run(monkeypatch, unit, OneUnitPipeline(writer, before_commit=finish_elsewhere))
    assert (writer.called, writer.discarded) == (0, 1)


def test_a_failing_writer_is_discarded_and_the_unit_fails(monkeypatch, unit):
    writer = RecordingWriter(fail=True)
    _run(monkeypatch, unit, OneUnitPipeline(writer))
    assert (writer.called, writer.discarded, unit.status) == (1, 1, UnitStatus.FAILED)
    assert "disk full" in unit.error


def test_a_unit_whose_llm_calls_cannot_be_recorded_fails_instead_of_staying_pending(monkeypatch, unit):
    def unwritable(calls):
        raise RuntimeError("value out of range")

    monkeypatch.setattr(services, "llm_calls_write", unwritable)
    writer = RecordingWriter()
    _run(monkeypatch, unit, OneUnitPipeline(writer))
    assert (writer.called, writer.discarded, unit.status) == (0, 1, UnitStatus.FAILED)
    assert "recording the LLM calls failed" in unit.error


def test_a_unit_whose_database_was_out_of_reach_is_run_again(eager, monkeypatch, unit):
    """A full connection pool before the unit could even be read: the run waits and tries again, not stranded."""
    from psycopg_pool import PoolTimeout

    from simia_web.jobs import tasks, unit_rows

    claim = unit_rows.unit_claim_for_run
    failures = iter([PoolTimeout("couldn't get a connection after 30.00 sec")])

    def pool_timeout_once(unit_id, **kwargs):
        if (failure := next(failures, None)) is not None:
            raise failure
        return claim(unit_id, **kwargs)

    monkeypatch.setattr(unit_rows, "unit_claim_for_run", pool_timeout_once)
    writer = RecordingWriter()
    monkeypatch.setattr(services, "job_kind_for", lambda kind: OneUnitPipeline(writer))
    monkeypatch.setattr(services, "job_advance", lambda **kwargs: None)
    tasks.unit_execute.delay(unit.pk)
    unit.refresh_from_db()
    assert (writer.called, unit.status) == (1, UnitStatus.DONE)


def test_recovery_resends_every_pending_unit_of_the_current_stage(db, monkeypatch):
    """Whether a unit's message is waiting, held by a live worker or lost, sending it again is safe."""
    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    waiting, lost = (JobUnit.objects.create(job=job, stage="rollout", key=f"u{i}") for i in range(2))
    JobUnit.objects.create(job=job, stage="rollout", key="done", status=UnitStatus.DONE)
    JobUnit.objects.create(job=job, stage="tasks", key="earlier")
    finished = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    advanced = []
    monkeypatch.setattr(services, "job_advance", lambda **kwargs: advanced.append(kwargs))
    sent = []
    monkeypatch.setattr(services, "_enqueue_units", sent.extend)
    assert services.jobs_recover() == 2
    assert sorted(sent) == [waiting.pk, lost.pk]
    assert advanced == [{"job_id": finished.pk, "stage": "rollout"}]


def test_a_unit_delivered_again_after_recovery_is_written_once(monkeypatch, unit):
    writer = RecordingWriter()
    _run(monkeypatch, unit, OneUnitPipeline(writer))
    monkeypatch.setattr(services, "_enqueue_units", lambda ids: [services.unit_execute(unit_id=i) for i in ids])
    assert services.jobs_recover() == 0  # nothing pending any more
    _run(monkeypatch, unit, OneUnitPipeline(writer))
    assert (writer.called, unit.attempts) == (1, 1)


def test_units_are_sent_in_batches(db, redis_queue, monkeypatch):
    """Batches let workers start while the rest is built; the stage's last message says it is the last."""
    import json

    from kombu.transport.redis import PublishBatch

    flushed = []
    flush = PublishBatch.flush

    def counted_flush(self):
        flushed.append(self._buffered)
        return flush(self)

    monkeypatch.setattr(PublishBatch, "flush", counted_flush)
    client, queue = redis_queue
    unit_ids = list(range(100, 100 + services.PUBLISH_BATCH + 8))
    services._enqueue_units(unit_ids, whole_stage=True)
    sent = [json.loads(m)["headers"] for m in reversed(client.lrange(queue, 0, -1))]
    assert [h["argsrepr"] for h in sent] == [f"({unit_id},)" for unit_id in unit_ids]
    assert [n for n in flushed if n] == [services.PUBLISH_BATCH, 8]  # one round trip per batch
    assert [h["kwargsrepr"] for h in sent[-2:]] == ["{}", "{'last_of_stage': True}"]

    client.delete(queue)
    services._enqueue_units([7, 8])  # re-queued by recovery: not known to be a stage's last
    assert [json.loads(m)["headers"]["kwargsrepr"] for m in client.lrange(queue, 0, -1)] == ["{}", "{}"]


def test_a_filesystem_consumer_never_takes_a_message_still_being_written(tmp_path, monkeypatch):
    """kombu's filesystem transport creates a message's file, then writes it: a worker listing the folder
    in between took the empty file and stopped on a JSON error. Messages are written to an outbox, and
    only whole ones are moved where workers take them (jobs.broker_folder)."""
    import builtins
    import contextlib
    from queue import Empty

    import kombu.transport.filesystem
    from kombu import Connection

    from simia_web.jobs.broker_folder import outbox_promote

    outbox, inbox = tmp_path / "outbox", tmp_path / "inbox"
    outbox.mkdir()
    inbox.mkdir()
    options = {"data_folder_in": str(inbox), "data_folder_out": str(outbox)}
    seen = []
    with Connection("filesystem://", transport_options=options) as conn:
        channel = conn.default_channel

        class ProbedFile:
            def __init__(self, file):
                self.file = file

            def write(self, data):
                # What a worker would do while the file exists but is still empty.
                assert outbox_promote(outbox, inbox) == 0
                with contextlib.suppress(Empty):
                    seen.append(channel._get("celery"))
                return self.file.write(data)

            def __getattr__(self, name):
                return getattr(self.file, name)

        def probed_open(*args, **kwargs):
            return ProbedFile(builtins.open(*args, **kwargs))

        monkeypatch.setattr(kombu.transport.filesystem, "open", probed_open, raising=False)
        channel._put("celery", {"n": 1})
        monkeypatch.undo()
        assert seen == []
        assert outbox_promote(outbox, inbox) == 1
        assert channel._get("celery") == {"n": 1}
    assert list(outbox.iterdir()) == [] and list(inbox.iterdir()) == []


def test_the_last_unit_of_a_stage_marks_its_job_finishing(monkeypatch, unit):
    """From then on this worker gives the job's units the endpoint fewest-calls-first (llm_slot_rank)."""
    from simia_web.llm import services as llm_services

    monkeypatch.setattr(services, "job_kind_for", lambda kind: OneUnitPipeline(RecordingWriter()))
    monkeypatch.setattr(services, "job_advance", lambda **kwargs: None)
    services.unit_execute(unit_id=unit.pk)
    assert unit.job_id not in llm_services._finishing_jobs
    other = JobUnit.objects.create(job=unit.job, stage="rollout", key="u2")
    services.unit_execute(unit_id=other.pk, last_of_stage=True)
    assert unit.job_id in llm_services._finishing_jobs
