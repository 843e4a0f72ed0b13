"""Audit services: the frozen population, reproducible draws, refusals of bad input, decisions counted (an edited
member included), and accepting the rest at the ceiling through the bulk path."""

import numpy as np
import pytest

from simia_web.accounts.models import default_workspace_id
from simia_web.accounts.services import user_create
from simia_web.audits.models import Acceptance, Audit, AuditItem
from simia_web.audits.selectors import audit_estimate, audit_queue
from simia_web.audits.services import audit_accept_rest, audit_claim_next, audit_create
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Decision, Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import gold_mark, review_decide, review_undo, trajectory_edit
from tests.conftest import PASSWORD
from tests.support.factories import assign_to_vote, conversation, make_trajectory, verdict

pytestmark = pytest.mark.django_db


def population(n: int = 30, *, domain: str = "shop", failing_every: int = 5) -> list[Trajectory]:
    """`n` trajectories waiting for review, every `failing_every`-th failed by the judge."""
    return [
        make_trajectory(
            domain,
            judge=verdict(passed=i % failing_every != 0, score=0.3 if i % failing_every == 0 else 0.9, confidence=0.8),
        )
        for i in range(n)
    ]


def decide(audit: Audit, user, *, reject_every: int = 0, count: int | None = None) -> list[Review]:
    """Decide the audit's items through its stream, as a person would: claim, then accept or reject."""
    made = []
    for i in range(count if count is not None else audit.sample_size):
        claimed = audit_claim_next(audit=audit, user=user)
        if claimed is None:
            break
        trajectory = Trajectory.objects.get(pk=claimed.pk)
        rejected = bool(reject_every) and i % reject_every == 0
        made.append(
            review_decide(
                trajectory=trajectory,
                reviewer=user,
                decision=Decision.REJECT if rejected else Decision.ACCEPT,
                expected_version=trajectory.version,
                reason="wrong" if rejected else "",
            )
        )
    return made


def test_the_population_is_frozen_and_later_writes_change_neither_it_nor_the_probabilities(users):
    members = population(20)
    audit = audit_create(filters={"domain": "shop"}, sample_size=5, strategy="active", seed=3, actor=users["curator"])
    frozen = audit.members
    ids, inclusion = frozen.array("ids").copy(), frozen.array("inclusion").copy()
    assert audit.population == 20 and sorted(ids.tolist()) == sorted(t.pk for t in members)
    assert (inclusion > 0).all() and inclusion.sum() == pytest.approx(5)
    items = list(AuditItem.objects.filter(audit=audit).values_list("trajectory_id", "inclusion_probability"))

    # More trajectories arrive and a member is judged again: the audit's population and draw stay as they were.
    population(10)
    Trajectory.objects.filter(pk=members[0].pk).update(judge_score=0.01, judge_passed=False)
    audit = Audit.objects.get(pk=audit.pk)
    assert audit.population == 20
    assert np.array_equal(audit.members.array("ids"), ids)
    assert np.array_equal(audit.members.array("inclusion"), inclusion)
    assert list(AuditItem.objects.filter(audit=audit).values_list("trajectory_id", "inclusion_probability")) == items


@pytest.mark.parametrize("strategy", ["uniform", "active"])
def test_a_draw_is_reproducible_from_its_seed(users, strategy):
    population(40)
    curator = users["curator"]

    def drawn(seed):
        audit = audit_create(filters={}, sample_size=8, strategy=strategy, seed=seed, actor=curator)
        return list(audit.items.order_by("position").values_list("trajectory_id", "inclusion_probability"))

    assert drawn(11) == drawn(11)
    assert drawn(11) != drawn(12)


@pytest.mark.parametrize(
    ("arguments", "field", "words"),
    [
        ({"filters": {"colour": "red"}}, "filters", "unknown filter colour"),
        ({"filters": {"mine": "true"}}, "filters", "unknown filter mine"),
        ({"filters": {"min_score": "high"}}, "filters.min_score", "number"),
        ({"filters": {"domain": "nowhere"}}, "filters", "population is empty"),
        ({"sample_size": 0}, "sample_size", "at least 1"),
        ({"sample_size": 11}, "sample_size", "larger than the population (10"),
        ({"sample_size": "many"}, "sample_size", "whole number"),
        ({"strategy": "greedy"}, "strategy", "unknown strategy"),
        ({"seed": -1}, "seed", "at least 0"),
    ],
)
def test_bad_input_is_refused_naming_the_field(users, arguments, field, words):
    population(10)
    given = {"filters": {}, "sample_size": 3, "strategy": "uniform", "seed": 1, **arguments}
    with pytest.raises(ValidationFailed) as refused:
        audit_create(**given, actor=users["curator"])
    assert refused.value.field == field and words in refused.value.detail
    assert not Audit.objects.exists()


def test_the_stream_gives_items_out_in_the_draw_order_and_skips_decided_ones(users):
    population(12)
    audit = audit_create(filters={}, sample_size=6, strategy="uniform", seed=5, actor=users["curator"])
    order = list(audit.items.order_by("position").values_list("trajectory_id", flat=True))
    annotator = users["annotator"]
    first = audit_claim_next(audit=audit, user=annotator)
    assert first.pk == order[0]
    assert audit_claim_next(audit=audit, user=users["admin"]).pk == order[1]  # the first is held
    assert audit_claim_next(audit=audit, user=annotator, after_position=0).pk == order[2]  # skipped ahead
    assert len(decide(audit, annotator, count=6)) == 5  # every item but the one the admin holds
    assert list(audit_queue(audit).values_list("pk", flat=True)) == [order[1]]


def test_decisions_count_and_the_estimate_appears_with_the_first(users):
    population(30)
    audit = audit_create(filters={}, sample_size=20, strategy="uniform", seed=2, actor=users["curator"])
    empty = audit_estimate(audit)
    assert empty.estimate is None and empty.human_only is None and empty.counted == 0
    decide(audit, users["annotator"], reject_every=4, count=12)
    estimate = audit_estimate(audit, trace=True)
    assert estimate.counted == 12 and estimate.rejected == 3
    assert estimate.human_only.error_rate == pytest.approx(3 / 12)
    assert estimate.human_only.low < 0.25 < estimate.human_only.high
    assert estimate.estimate is not None and estimate.needed > 0
    assert estimate.trace[-1]["k"] == 12 and estimate.trace[0]["k"] == 1


def test_an_undone_decision_no_longer_counts_and_bulk_decisions_never_do(users):
    population(10)
    audit = audit_create(filters={}, sample_size=4, strategy="uniform", seed=1, actor=users["curator"])
    [review] = decide(audit, users["annotator"], reject_every=1, count=1)
    assert audit_estimate(audit).counted == 1
    review_undo(review=review, actor=users["annotator"])
    assert audit_estimate(audit).counted == 0


def test_a_member_edited_after_the_freeze_is_reported_and_its_decision_counts_for_the_text_decided(users):
    population(6)
    audit = audit_create(filters={}, sample_size=3, strategy="uniform", seed=9, actor=users["curator"])
    first = audit.items.get(position=0).trajectory
    edited = trajectory_edit(
        trajectory=first,
        editor=users["admin"],
        messages=conversation("Please cancel order W1 now.", "Done: W1 is cancelled."),
        expected_version=first.version,
    )
    from simia_web.curation.services import trajectory_release

    trajectory_release(trajectory_id=first.pk, user=users["admin"])
    state = audit_estimate(audit)
    assert [item.trajectory_id for item in state.edited] == [first.pk]
    review_decide(
        trajectory=edited,
        reviewer=users["annotator"],
        decision=Decision.REJECT,
        expected_version=edited.version,
        reason="still wrong",
    )
    state = audit_estimate(audit)
    [item] = state.decided
    assert item.edited and item.decided_text_version == edited.text_version and item.label == 1
    # A fix the decision makes itself is not an edit of what was decided (and counts as not acceptable as frozen).
    second = Trajectory.objects.get(pk=audit.items.get(position=1).trajectory_id)
    review_decide(
        trajectory=second,
        reviewer=users["annotator"],
        decision=Decision.FIX_ACCEPT,
        expected_version=second.version,
        messages=conversation("Please cancel order W1.", "Fixed answer."),
    )
    fixed = next(item for item in audit_estimate(audit).decided if item.trajectory_id == second.pk)
    assert not fixed.edited and fixed.label == 1


def test_accepting_the_rest_is_refused_above_the_ceiling_and_done_at_it(users):
    population(40, failing_every=100)
    curator = users["curator"]
    audit = audit_create(filters={}, sample_size=25, strategy="uniform", seed=4, actor=curator)
    decide(audit, users["annotator"], count=25)
    high = audit_estimate(audit).headline.high
    with pytest.raises(ValidationFailed) as refused:
        audit_accept_rest(audit=audit, max_error_rate=high - 0.001, actor=curator)
    assert refused.value.field == "max_error_rate"
    assert f"{high:.1%}" in refused.value.detail and f"{high - 0.001:.1%}" in refused.value.detail
    assert not Acceptance.objects.exists()

    # One member is edited after the freeze: the rest is accepted without it.
    rest = audit_estimate(audit).items
    undecided = [item.trajectory_id for item in rest if item.decision is None]
    outside = Trajectory.objects.exclude(pk__in=audit.items.values("trajectory_id")).first()
    trajectory_edit(
        trajectory=outside,
        editor=users["admin"],
        messages=conversation("Cancel W1, please.", "W1 is cancelled."),
        expected_version=outside.version,
    )
    acceptance = audit_accept_rest(audit=audit, max_error_rate=high, actor=curator)
    assert acceptance.accepted == 40 - 25 - 1 - len(undecided)
    accepted = Review.objects.filter(audit=audit.pk)
    assert accepted.count() == acceptance.accepted and all(r.bulk for r in accepted)
    assert f"audit {audit.pk}" in accepted.first().reason
    outside.refresh_from_db()
    assert outside.status != TrajectoryStatus.ACCEPTED


def test_a_large_rest_is_accepted_by_a_bulk_decision_job_naming_the_audit(eager, users, client, monkeypatch):
    from simia_web.audits import services
    from simia_web.curation.job_kinds import bulk_decision
    from simia_web.jobs.models import JobStatus

    monkeypatch.setattr(services, "ACCEPT_IN_REQUEST_MAX", 10)  # this population counts as a large one
    monkeypatch.setattr(bulk_decision, "IDS_PER_UNIT", 7)  # and its job has several units
    members = population(30, failing_every=100)
    curator = users["curator"]
    audit = audit_create(filters={}, sample_size=12, strategy="active", seed=8, actor=curator)
    decide(audit, users["annotator"], count=12)
    held = Trajectory.objects.exclude(pk__in=audit.items.values("trajectory_id")).first()
    from simia_web.curation.services import trajectory_reserve

    trajectory_reserve(trajectory=held, user=users["admin"])  # someone is reading it: left as it is
    acceptance = audit_accept_rest(audit=audit, max_error_rate=1.0, actor=curator)
    job = acceptance.job
    job.refresh_from_db()
    assert job.kind == "bulk-decision" and job.status == JobStatus.SUCCEEDED, job.error
    assert job.summary["changed"] == 30 - 12 - 1 and job.summary["held"] == 1
    accepted = Review.objects.filter(audit=audit.pk)
    assert accepted.count() == 17 and {str(r.batch) for r in accepted} == {str(acceptance.batch)}
    assert Trajectory.objects.filter(pk__in=[m.pk for m in members], status=TrajectoryStatus.ACCEPTED).count() == 29
    client.force_login(curator)
    assert client.get(f"/jobs/{job.pk}/").status_code == 200
    assert f"/jobs/{job.pk}/" in client.get(f"/audits/{audit.pk}/").content.decode()


def test_postgresql_reads_the_population_as_arrays_the_same_as_rows(users):
    from django.db import connection

    from simia_web.audits import population as read
    from simia_web.audits.services import audit_population
    from simia_web.curation.services import verdict_record

    if connection.vendor != "postgresql":
        pytest.skip("the arrays are PostgreSQL's")
    members = population(9)
    make_trajectory(violations=["unknown_tool"])  # no verdict
    verdict_record(trajectory_id=members[0].pk, version=1, verdict={"error": "timed out", "passed": None})
    verdict_record(
        trajectory_id=members[1].pk,
        version=1,
        verdict={**verdict(passed=False, score=0.2), "scores": {"task_completed": 0.1, "policy_followed": "n/a"}},
    )
    queryset = audit_population({"status": "all"}, workspace_id=default_workspace_id())
    rows, arrays = read._members(queryset), read._members_arrays(queryset)
    assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(rows, arrays, strict=True))
    ids = rows[0]
    by_rows, by_arrays = read._verdicts(queryset, ids), read._verdicts_arrays(ids)
    for a, b in zip(by_rows[:2], by_arrays[:2], strict=True):
        assert np.array_equal(a, b, equal_nan=True)
    assert by_rows[2] == by_arrays[2] == {("stub-model", ""): 9}
    failed, spread = by_arrays[0], by_arrays[1]
    second = int(np.searchsorted(ids, members[1].pk))
    # The latest verdict's: task_completed failed, policy_followed not a number, the rest not given.
    assert failed[0, second] == 1.0 and np.isnan(failed[1:, second]).all() and spread[second] == 0
    assert failed[0, 2] == 0.0 and spread[2] == 0  # both criteria at 0.9
    assert np.isnan(failed[:, -1]).all() and np.isnan(spread[-1])  # no verdict


def test_a_gold_item_in_the_sample_counts_with_its_expected_answer_and_is_given_to_nobody(users):
    items = population(10)
    audit = audit_create(filters={}, sample_size=10, strategy="uniform", seed=3, actor=users["curator"])
    gold = items[4]
    gold_mark(trajectory=gold, expected_decision=Decision.REJECT, explanation="a wrong refund", actor=users["curator"])
    assert audit_estimate(audit).counted == 1 and audit_estimate(audit).rejected == 1
    assert gold.pk not in audit_queue(audit).values_list("pk", flat=True)
    decided = decide(audit, users["annotator"])
    assert len(decided) == 9 and all(r.trajectory_id != gold.pk for r in decided)
    assert audit_estimate(audit).counted == 10


def test_a_decision_made_by_consensus_counts_for_the_audit(users):
    population(4)
    audit = audit_create(filters={}, sample_size=4, strategy="uniform", seed=3, actor=users["curator"])
    voters = [users["annotator"], user_create(username="second", role="annotator", password=PASSWORD)]
    first = audit_queue(audit).first()
    assign_to_vote([first.pk], voters, rule="majority")
    for person in voters:
        first.refresh_from_db()
        review_decide(trajectory=first, reviewer=person, decision=Decision.ACCEPT, expected_version=first.version)
    assert audit_estimate(audit).counted == 1
