"""A rollup rebuild as a job of units (groups of whole domains) that any worker takes leaves the rows the single pass
(manage.py rebuild_rollups) leaves, whatever the rows were wrong by, and keeps what writers change while it runs."""

import io

import pytest
from django.core.management import call_command
from django.db import connection
from django.db.models import F

from simia_web.accounts.models import Workspace, default_workspace_id
from simia_web.accounts.services import workspace_review_stage_set
from simia_web.catalog.services import domain_ensure
from simia_web.core.errors import Conflict
from simia_web.curation.job_kinds import rollups_rebuild as kind
from simia_web.curation.models import Decision, Figure, Review, ReviewStage, Rollup, Trajectory
from simia_web.curation.rollups import (
    KEY_COLUMNS,
    ROLLUPS_JOB_KIND,
    rollups_correction,
    rollups_rebuild,
    rollups_rebuild_queue,
    rollups_units,
)
from simia_web.curation.services import (
    review_decide,
    review_undo,
    reviews_bulk,
    reviews_bulk_undo,
    verdict_record,
)
from simia_web.jobs.models import Job, JobStatus, JobUnit, UnitStatus
from simia_web.jobs.services import unit_execute
from simia_web.llm.models import EndpointProfile
from tests.conftest import wait_for
from tests.curation.test_rollups import _scores, assert_rollups_equal_a_recount
from tests.support.factories import make_job, make_trajectory, verdict

DOMAINS = ("shop", "bank", "air")


def reviewed_data(users, count: int = 48) -> list[int]:
    """`count` trajectories in three domains and three jobs (one of them none), written through the services with
    the reviewer stage on: verdicts of two judge profiles with criterion scores (and none), rule violations, decisions
    made one by one (some undone, some superseded), annotators' decisions awaiting a reviewer and others a reviewer
    settled, bulk decisions (one batch undone). Returns their ids."""
    workspace_review_stage_set(
        workspace=Workspace.objects.get(pk=default_workspace_id()), on=True, actor=users["admin"]
    )
    jobs = [None, make_job(), make_job()]
    profile = EndpointProfile.objects.create(name="judge-b", model="j")
    annotator, reviewer, curator = users["annotator"], users["reviewer"], users["curator"]
    ids = []
    for i in range(count):
        passed = [True, False, None][i % 3]
        judge = None if passed is None else verdict(passed=passed, score=(i % 10) / 10, scores=_scores((i % 7) / 7))
        broken = [["unknown_tool"], ["unknown_tool", "empty_message"]][i % 2] if i % 4 == 0 else []
        ids.append(make_trajectory(DOMAINS[i % 3], judge=judge, job=jobs[(i // 3) % 3], violations=broken).pk)

    def fresh(pk):
        return Trajectory.objects.get(pk=pk)

    for i, pk in enumerate(ids[:30]):
        if i % 6 == 1:  # waits for a reviewer
            review_decide(trajectory=fresh(pk), reviewer=annotator, decision=Decision.ACCEPT, expected_version=1)
        elif i % 6 == 2:
            review = review_decide(
                trajectory=fresh(pk), reviewer=curator, decision=Decision.REJECT, reason="no", expected_version=1
            )
            if i % 12 == 2:
                review_undo(review=review, actor=curator)
        elif i % 6 == 3:  # decided, then decided again: the first is superseded
            review_decide(trajectory=fresh(pk), reviewer=curator, decision=Decision.ACCEPT, expected_version=1)
            t = fresh(pk)
            review_decide(
                trajectory=t, reviewer=reviewer, decision=Decision.REJECT, reason="no", expected_version=t.version
            )
        elif i % 6 == 4:  # judged again by another profile
            answer = {**verdict(passed=i % 4 == 0, score=0.4, scores=_scores(0.25)), "error": "", "profile": profile}
            verdict_record(trajectory_id=pk, version=fresh(pk).version, verdict=answer)
    awaiting = Review.objects.filter(stage=ReviewStage.AWAITING, superseded_at__isnull=True).order_by("pk")
    for n, review in enumerate(list(awaiting)[:3]):  # settled by a reviewer: confirmed, overturned
        t = fresh(review.trajectory_id)
        decision = Decision.ACCEPT if n % 2 == 0 else Decision.REJECT
        review_decide(trajectory=t, reviewer=reviewer, decision=decision, reason="no", expected_version=t.version)
    reviews_bulk(trajectories=Trajectory.objects.filter(pk__in=ids[30:40]), reviewer=curator, decision=Decision.ACCEPT)
    undone = reviews_bulk(
        trajectories=Trajectory.objects.filter(pk__in=ids[40:44]),
        reviewer=curator,
        decision=Decision.REJECT,
        reason="x",
    )
    reviews_bulk_undo(batch=undone.batch, actor=curator, workspace_ids=[default_workspace_id()])
    return ids


def rows() -> dict:
    """The rollup rows that count something: {key: (n, total)} (a correction may leave a row at zero, as writers do;
    sums are compared to 1e-9, as additions in another order may differ in their last bit)."""
    found = Rollup.objects.exclude(n=0).values_list(*KEY_COLUMNS, "n", "total")
    return {tuple(row[:7]): (row[7], round(row[8], 9)) for row in found}


def damage(users) -> None:
    """Rows gone, rows wrong, rows of a domain without trajectories and of a job deleted since."""
    stored = list(Rollup.objects.order_by("pk").values_list("pk", flat=True))
    Rollup.objects.filter(pk__in=stored[::5]).delete()
    Rollup.objects.filter(pk__in=stored[1::7]).update(n=F("n") + 3, total=F("total") + 0.5)
    Rollup.objects.update_or_create(
        figure=Figure.STATUS, domain=domain_ensure(name="empty"), label="accepted", defaults={"n": 4}
    )
    Rollup.objects.update_or_create(
        figure=Figure.DECISIONS,
        domain=domain_ensure(name="shop"),
        job=999_999,
        reviewer=users["curator"].pk,
        defaults={"n": 2},
    )


def assert_figures_all_there() -> None:
    figures = set(Rollup.objects.exclude(n=0).values_list("figure", flat=True))
    assert figures >= set(Figure.values), set(Figure.values) - figures


def test_a_domain_group_unit_counts_whole_domains_in_id_order(users):
    for i in range(7):
        make_trajectory(DOMAINS[i % 3])
    empty = domain_ensure(name="empty")
    shop, bank, air = (domain_ensure(name=name).pk for name in DOMAINS)
    assert rollups_units(trajectories_per_unit=5) == [[shop, bank], [air, empty.pk]]
    assert rollups_units(trajectories_per_unit=2) == [[shop], [bank], [air, empty.pk]]
    assert rollups_units(trajectories_per_unit=100) == [[shop, bank, air, empty.pk]]


def test_writes_between_a_units_count_and_its_write_are_kept(users):
    """What a correction adds is what the rows were wrong by, which no write changes: writes made after the count
    (decisions, bulk decisions, their undo, new trajectories, verdicts) stay counted once the correction is added."""
    ids = reviewed_data(users, count=24)
    damage(users)
    progress = []
    correction = rollups_correction(
        domain_ids=[domain_ensure(name=name).pk for name in (*DOMAINS, "empty")],
        progress=lambda done, total: progress.append((done, total)),
    )
    assert progress == [(0, 24), (24, 24)]
    curator = users["curator"]
    t = Trajectory.objects.get(pk=ids[0])
    review_decide(trajectory=t, reviewer=curator, decision=Decision.REJECT, reason="late", expected_version=t.version)
    batch = reviews_bulk(trajectories=Trajectory.objects.filter(pk__in=ids[12:20]), reviewer=curator, decision="accept")
    reviews_bulk_undo(batch=batch.batch, actor=curator, workspace_ids=[default_workspace_id()])
    make_trajectory("air", judge=verdict(passed=False, score=0.1), violations=["unknown_tool"])
    verdict_record(trajectory_id=ids[5], version=Trajectory.objects.get(pk=ids[5]).version, verdict=verdict(score=0.7))
    result = correction()
    assert result["domains"] == 4 and result["trajectories"] == 24 and result["rows_corrected"] > 5
    assert_rollups_equal_a_recount()


@pytest.fixture
def single_pass(users):
    """The rows the single pass leaves on the reviewed data, then damaged for the job to mend."""
    reviewed_data(users)
    out = io.StringIO()
    call_command("rebuild_rollups", stdout=out)
    assert out.getvalue().startswith("Rebuilt the rollups:")
    assert_figures_all_there()
    made = rows()
    damage(users)
    assert rows() != made
    return made


def test_the_job_mends_the_rows_as_the_single_pass_does(eager, single_pass, monkeypatch):
    job = rollups_rebuild_queue(trajectories_per_unit=16)
    job.refresh_from_db()

    assert job.status == JobStatus.SUCCEEDED, job.error
    units = list(job.units.order_by("key"))
    assert [len(unit.params["domains"]) for unit in units] == [1, 1, 2]  # "empty" beside the last of 16
    assert job.summary["trajectories"] == 48 and job.summary["domains"] == 4
    assert rows() == single_pass
    assert job.summary["rows"] == len(single_pass)

    # The same unit's message again (a redelivery after its worker was thought lost): it is done, nothing is added.
    unit_execute(unit_id=units[0].pk)
    assert rows() == single_pass
    # A unit run twice at once: both count, the engine records one, whose correction is added once.
    Rollup.objects.filter(figure=Figure.STATUS).update(n=F("n") + 1)
    counted = []
    real = kind.rollups_correction

    def twice(**kwargs):
        counted.append(real(**kwargs))  # the other delivery's count, never recorded
        return real(**kwargs)

    monkeypatch.setattr(kind, "rollups_correction", twice)
    again = rollups_rebuild_queue(trajectories_per_unit=16)
    again.refresh_from_db()
    assert again.status == JobStatus.SUCCEEDED and len(counted) == 3
    assert rows() == single_pass


def test_one_rebuild_at_a_time(users):
    job = rollups_rebuild_queue(trajectories_per_unit=10)  # queued, never started: no worker here
    with pytest.raises(Conflict, match=f"Job {job.pk} is rebuilding"):
        rollups_rebuild_queue(trajectories_per_unit=10)
    with pytest.raises(Conflict, match=f"Job {job.pk} is rebuilding"):
        rollups_rebuild()
    Job.objects.filter(pk=job.pk).update(status=JobStatus.CANCELLED)
    rollups_rebuild()


@pytest.mark.integration
def test_the_job_on_workers_equals_the_single_pass_while_writers_carry_on(celery_worker, single_pass, users, settings):
    if not settings.CELERY_BROKER_URL.startswith("redis://") or connection.vendor != "postgresql":
        pytest.skip("set DATABASE_URL to PostgreSQL and CELERY_BROKER_URL to Redis (make test does)")
    celery_worker(concurrency=2)
    out = io.StringIO()
    call_command("rebuild_rollups", "--queue", "--trajectories-per-unit", "16", stdout=out)
    job = Job.objects.get(kind=ROLLUPS_JOB_KIND)
    assert job.status == JobStatus.SUCCEEDED and job.units.filter(status=UnitStatus.DONE).count() == 3
    assert rows() == single_pass
    assert out.getvalue().rstrip().endswith(f"Rebuilt the rollups: {len(single_pass)} rows.")

    # Damaged again, and mended by a job while decisions are made: the rows end as a recount of the end.
    damage(users)
    job = rollups_rebuild_queue(trajectories_per_unit=16)
    curator, pending = (
        users["curator"],
        list(Trajectory.objects.filter(reviews__isnull=True).values_list("pk", flat=True)),
    )
    decided = 0
    while decided < len(pending) and (decided < 6 or Job.objects.get(pk=job.pk).is_active):
        t = Trajectory.objects.get(pk=pending[decided])
        review_decide(trajectory=t, reviewer=curator, decision=Decision.ACCEPT, expected_version=t.version)
        decided += 1
    wait_for(lambda: not Job.objects.get(pk=job.pk).is_active, timeout=60, message="the rebuild job")
    assert Job.objects.get(pk=job.pk).status == JobStatus.SUCCEEDED
    assert_rollups_equal_a_recount()
    assert JobUnit.objects.filter(job=job, status=UnitStatus.DONE).count() == 3
