"""The rollups behind the dashboard and the agreement page: equal to a full recount after any sequence of writes, and
pages whose queries do not grow with the number of trajectories."""

import contextlib
import io
import re
import uuid

import pytest
from django.core.management import call_command
from django.db import connection, transaction
from django.test.utils import CaptureQueriesContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from simia_web.accounts.models import default_workspace_id
from simia_web.catalog.services import domain_ensure
from simia_web.core.errors import HeldByOther
from simia_web.curation.models import Decision, JudgeVerdict, Review, Rollup, Trajectory, TrajectoryStatus
from simia_web.curation.rollups import rollups_count, rollups_rebuild
from simia_web.curation.selectors.agreement import agreement
from simia_web.curation.selectors.dashboard import score_histogram, status_counts, verdicts_by_domain
from simia_web.curation.services import (
    ReviewError,
    review_decide,
    review_undo,
    reviews_bulk,
    reviews_bulk_undo,
    trajectory_edit,
    trajectory_revert,
    verdict_record,
)
from simia_web.curation.versions import StaleVersion
from simia_web.jobs.models import Job
from simia_web.llm.models import EndpointProfile
from tests.support.factories import make_job, make_trajectory, verdict


def _stored() -> dict:
    rows = Rollup.objects.filter(n__gt=0).values_list(
        "figure", "domain_id", "job", "profile", "reviewer", "day", "label", "n", "total"
    )
    return {tuple(row[:7]): (row[7], row[8]) for row in rows}


def assert_rollups_equal_a_recount():
    counted = {key: (n, total) for key, (n, total) in rollups_count().items() if n}
    stored = _stored()
    assert stored.keys() == counted.keys()
    for key, (n, total) in counted.items():
        assert stored[key][0] == n, key
        assert stored[key][1] == pytest.approx(total, abs=1e-9), key


def _scores(draw_value: float) -> dict:
    return {"task_completed": draw_value, "tool_use_correct": {"score": 1 - draw_value}, "note": "n/a"}


# One write of the sequence: (what, which trajectory, a choice among the write's variants).
WRITES = st.tuples(
    st.sampled_from(["import", "decide", "edit", "revert", "undo", "bulk", "bulk_undo", "judge_again"]),
    st.integers(0, 5),
    st.integers(0, 5),
)


class Writer:
    """Applies writes through the services, as people and pipelines make them; refusals are part of the game."""

    def __init__(self, users):
        self.people = [users["annotator"], users["curator"]]
        self.profiles = [None, EndpointProfile.objects.create(name=f"judge-{uuid.uuid4().hex[:6]}", model="j")]
        self.jobs = [None, make_job()]
        self.batches = []

    def trajectory(self, i):
        ids = list(Trajectory.objects.order_by("pk").values_list("pk", flat=True))
        return Trajectory.objects.get(pk=ids[i % len(ids)]) if ids else None

    def apply(self, what, i, choice):
        if what == "import" or not Trajectory.objects.exists():
            passed = [True, False, None][choice % 3]
            judge = None if passed is None else verdict(passed=passed, score=choice / 5, scores=_scores(choice / 5))
            broken = [["unknown_tool"], ["unknown_tool", "empty_message"]][i % 2] if choice > 3 else []
            make_trajectory(["shop", "bank"][i % 2], judge=judge, job=self.jobs[choice % 2], violations=broken)
            return
        t, person = self.trajectory(i), self.people[choice % 2]
        with contextlib.suppress(ReviewError, StaleVersion, HeldByOther):
            getattr(self, what)(t, person, choice)

    def decide(self, t, person, choice):
        decision = [Decision.ACCEPT, Decision.REJECT, Decision.FIX_ACCEPT][choice % 3]
        messages = [*t.messages[:-1], {"role": "assistant", "content": f"Fixed {choice}."}]
        review_decide(
            trajectory=t,
            reviewer=person,
            decision=decision,
            reason="no" if decision == Decision.REJECT else "",
            expected_version=t.version,
            messages=messages if decision == Decision.FIX_ACCEPT else None,
        )

    def edit(self, t, person, choice):
        messages = [*t.messages[:-1], {"role": "assistant", "content": f"Edited {choice}."}]
        trajectory_edit(trajectory=t, editor=person, messages=messages, expected_version=t.version)

    def revert(self, t, person, choice):
        trajectory_revert(trajectory=t, to_version=1 + choice % 2, expected_version=t.version, actor=person)

    def undo(self, t, person, choice):
        review = Review.objects.filter(trajectory=t, undone_at__isnull=True, superseded_at__isnull=True).first()
        if review is not None:
            review_undo(review=review, actor=self.people[1])

    def bulk(self, t, person, choice):
        decision = Decision.ACCEPT if choice % 2 else Decision.REJECT
        chosen = Trajectory.objects.filter(pk__gte=t.pk)[: choice + 1]
        outcome = reviews_bulk(
            trajectories=Trajectory.objects.filter(pk__in=[c.pk for c in chosen]),
            reviewer=self.people[1],
            decision=decision,
            reason="bulk",
        )
        if outcome.batch:
            self.batches.append(outcome.batch)

    def bulk_undo(self, t, person, choice):
        if self.batches:
            batch = self.batches[choice % len(self.batches)]
            reviews_bulk_undo(batch=batch, actor=self.people[1], workspace_ids=[default_workspace_id()])

    def judge_again(self, t, person, choice):
        passed = choice % 2 == 0
        answer = {**verdict(passed=passed, score=choice / 5, scores=_scores(choice / 5)), "error": ""}
        if choice == 5:
            answer["error"] = "timeout"
        answer["profile"] = self.profiles[choice % 2]
        # Now and then a verdict on text that has since changed: it stays beside, as the latest verdict.
        version = t.text_version - 1 if choice == 3 and t.text_version > 1 else t.version
        verdict_record(trajectory_id=t.pk, version=version, verdict=answer)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(writes=st.lists(WRITES, min_size=1, max_size=14))
def test_rollups_equal_a_full_recount_after_any_writes(users, writes):
    with transaction.atomic():
        writer = Writer(users)
        for what, i, choice in writes:
            writer.apply(what, i, choice)
        assert_rollups_equal_a_recount()
        transaction.set_rollback(True)  # the next example starts from no trajectories


def test_rebuild_command_restores_rollups_of_rows_written_around_the_services(users):
    t = make_trajectory(judge=verdict(passed=True, score=0.95))
    Review.objects.create(trajectory=t, reviewer=users["annotator"], decision=Decision.REJECT, trajectory_version=1)
    Trajectory.objects.filter(pk=t.pk).update(status=TrajectoryStatus.REJECTED)
    default = [default_workspace_id()]
    assert agreement(workspace_ids=default)["total"] == 0  # not through a service: not counted
    call_command("rebuild_rollups", stdout=io.StringIO())
    assert_rollups_equal_a_recount()
    assert agreement(workspace_ids=default)["cells"]["pass_reject"] == 1
    assert status_counts(workspace_ids=default)[TrajectoryStatus.REJECTED] == 1
    assert score_histogram(workspace_ids=default)[-1][2] == 1
    assert verdicts_by_domain(workspace_ids=default) == {"shop": {"pass": 1}}


def _dataset(rows: int, users) -> int:
    """`rows` more trajectories in three domains and two jobs with verdicts, individual and bulk decisions, written
    directly (as a restore would) and then counted by the rebuild; returns the job's id."""
    domains = [domain_ensure(name=name) for name in ("shop", "bank", "air")]
    job = Job.objects.first() or make_job()
    profile, _ = EndpointProfile.objects.get_or_create(name="judge", defaults={"model": "j"})
    statuses = list(TrajectoryStatus.values)
    trajectories = Trajectory.objects.bulk_create(
        Trajectory(
            kind="rollout",
            domain=domains[i % 3],
            job=job if i % 4 < 2 else None,
            status=statuses[i % len(statuses)],
            judge_passed=None if i % 7 == 0 else i % 2 == 0,
            judge_score=None if i % 7 == 0 else (i % 10) / 10,
            judge_confidence=0.5,
            messages=[{"role": "user", "content": f"item {i}"}],
        )
        for i in range(rows)
    )
    JudgeVerdict.objects.bulk_create(
        JudgeVerdict(trajectory=t, passed=t.judge_passed, score=t.judge_score, scores=_scores(0.5), profile=profile)
        for t in trajectories
        if t.judge_passed is not None
    )
    Review.objects.bulk_create(
        Review(
            trajectory=t,
            reviewer=users["annotator"] if i % 2 else users["curator"],
            decision=Decision.REJECT if t.status == TrajectoryStatus.REJECTED else Decision.ACCEPT,
            trajectory_version=1,
            bulk=i % 5 == 0,
        )
        for i, t in enumerate(trajectories)
        if t.status in (TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED)
    )
    rollups_rebuild()
    return job.pk


def _page_queries(client, job: int) -> list[list[str]]:
    """The SQL of each page (its literals left out): the dashboard and the agreement page, whole and narrowed to a
    domain and a job."""
    pages = []
    for path, params in [
        ("/", {}),
        ("/", {"domain": "bank", "job": job}),
        ("/agreement/", {}),
        ("/agreement/", {"job": job}),
    ]:
        with CaptureQueriesContext(connection) as captured:
            assert client.get(path, params).status_code == 200
        pages.append(
            [re.sub(r"'[^']*'|_django_curs_\w+", "?", query["sql"]) for query in captured.captured_queries]
        )  # no times
    return pages


def test_dashboard_and_agreement_queries_do_not_grow_with_the_rows(client_for, users):
    client = client_for("annotator")
    job = _dataset(10, users)
    small = _page_queries(client, job)
    _dataset(1990, users)
    assert Trajectory.objects.count() == 2000
    assert sum(status_counts(workspace_ids=[default_workspace_id()]).values()) == 2000
    large = _page_queries(client, job)
    assert large == small  # the same queries, one per figure over the rollups
    # Each page reads the user's workspaces once for the header's switcher.
    assert [len(queries) for queries in large] == [14, 14, 10, 10]
