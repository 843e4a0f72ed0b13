"""Consensus: an assignment batch with a rule makes its k annotators' answers votes; the item is decided only when the
votes meet the rule, and votes that split past it wait for a reviewer, first in the reviewer queue."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import user_create, workspace_review_stage_set
from simia_web.calibration.models import RatingAssignment
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Review, TrajectoryStatus
from simia_web.curation.selectors.second_look import awaiting_review
from simia_web.curation.services import ReviewError, gold_mark, review_decide, review_undo, trajectory_release
from simia_web.curation.services.consensus import DISPUTE, consensus_outcome
from simia_web.exports.selectors import DEFAULT_STATUS
from tests.conftest import PASSWORD
from tests.curation.test_rollups import assert_rollups_equal_a_recount
from tests.support.factories import assign_to_vote, make_trajectory, verdict

RULES = ("majority", "unanimous", "adjudicate")


def _first_outcome(rule: str, k: int, votes: list[str]) -> tuple[str | None, int]:
    """What the votes come to as they arrive one by one, and how many were cast when it did."""
    for n in range(1, len(votes) + 1):
        outcome = consensus_outcome(rule, k, votes[:n])
        if outcome is not None:
            return outcome, n
    return None, len(votes)


@settings(max_examples=400, deadline=None)
@given(
    rule=st.sampled_from(RULES),
    k=st.integers(1, 7),
    votes=st.lists(st.sampled_from(["accept", "reject"]), min_size=1, max_size=7),
)
def test_the_rules_decide_only_when_met_and_send_every_split_to_a_reviewer(rule, k, votes):
    votes = votes[:k]
    outcome, cast = _first_outcome(rule, k, votes)
    seen = votes[:cast]
    accepts, rejects = seen.count("accept"), seen.count("reject")
    if outcome is None:  # waiting: fewer than k votes, and nothing the rule can say yet
        assert cast == len(votes) < k
        return
    if outcome == DISPUTE:
        assert accepts and rejects  # only a real disagreement goes to a reviewer
        if rule == "majority":
            assert cast == k and 2 * accepts <= k and 2 * rejects <= k  # a tie of all k votes
        elif rule == "unanimous":
            assert cast == k  # the split waits for every vote
        else:
            assert len(set(seen[:-1])) == 1  # at the first vote that differs
        return
    assert outcome == seen[-1]  # the vote that meets the rule is on the side that wins
    if rule == "majority":
        assert 2 * seen.count(outcome) > k and 2 * seen[:-1].count(outcome) <= k
    else:
        assert cast == k and set(seen) == {outcome}


@pytest.fixture
def voters(users):
    workspace = Workspace.objects.get(slug="default")
    people = [users["annotator"]] + [
        user_create(username=f"voter{i}", role="annotator", password=PASSWORD) for i in range(2)
    ]
    return workspace, people


def _assigned(workspace, people, rule, k=3, **kw):
    items = [make_trajectory(judge=verdict(passed=True), **kw) for _ in range(2)]
    made = assign_to_vote([t.pk for t in items], people, rule=rule, overlap=k, workspace=workspace)
    assert made["assignments"] == 2 * k
    return items


def _vote(t, person, decision):
    t.refresh_from_db()
    return review_decide(
        trajectory=t,
        reviewer=person,
        decision=decision,
        expected_version=t.version,
        reason="why" * (decision == "reject"),
    )


def test_majority_decides_with_the_second_agreeing_vote_and_counts_each_voter_once(voters):
    workspace, people = voters
    t, _ = _assigned(workspace, people, "majority")
    first = _vote(t, people[0], "accept")
    t.refresh_from_db()
    assert (first.stage, first.standing, t.status, t.version) == ("vote", False, TrajectoryStatus.JUDGED_PASS, 1)
    assert _vote(t, people[1], "reject").stage == "vote"
    decided = _vote(t, people[2], "accept")
    t.refresh_from_db()
    assert (decided.stage, decided.standing, decided.decision) == ("consensus", True, "accept")
    assert (t.status, t.version) == (TrajectoryStatus.ACCEPTED, 2) and t.status == DEFAULT_STATUS
    assert sorted(decided.sample) == sorted(
        Review.objects.filter(trajectory=t, stage="vote").values_list("pk", flat=True)
    )
    assert Review.objects.filter(trajectory=t, undone_at=None).count() == 3  # one row per voter
    assert_rollups_equal_a_recount()
    # A decision that stands ends the vote: a later answer is a decision as any other.
    assert _vote(t, people[1], "reject").stage == ""


def test_a_split_goes_to_the_reviewer_queue_first_and_a_reviewer_adjudicates(users, voters, client_for):
    workspace, people = voters
    t, waiting = _assigned(workspace, people, "adjudicate")
    plain = make_trajectory(judge=verdict(passed=True))
    workspace_review_stage_set(workspace=workspace, on=True, actor=users["admin"])
    review_decide(trajectory=plain, reviewer=users["annotator"], decision="accept", expected_version=1)
    _vote(t, people[0], "accept")
    disputed = _vote(t, people[1], "reject")  # adjudicate: the first vote that differs
    t.refresh_from_db()
    assert (disputed.stage, disputed.standing, t.status) == ("disputed", True, TrajectoryStatus.AWAITING_REVIEW)
    assert t.status != DEFAULT_STATUS
    with pytest.raises(ReviewError, match="not one of them"):
        _vote(waiting, user_create(username="outsider", role="annotator", password=PASSWORD), "accept")
    queue = list(awaiting_review(workspace_ids=[workspace.pk]))
    assert [r.trajectory_id for r in queue][:1] == [t.pk]  # disagreement first, before an older plain decision
    page = client_for("reviewer").get(f"/trajectories/{t.pk}/?second_look=1").content.decode()
    assert "Votes disagree" in page and 'id="dispute-votes"' in page
    adjudication = _vote(t, users["reviewer"], "reject")
    disputed.refresh_from_db()
    t.refresh_from_db()
    assert (adjudication.stage, disputed.stage, disputed.checked_by) == ("", "adjudicated", users["reviewer"])
    assert t.status == TrajectoryStatus.REJECTED
    assert_rollups_equal_a_recount()


def test_unanimous_waits_for_every_vote_and_votes_are_hidden_from_other_annotators(voters, client_for):
    workspace, people = voters
    t, _ = _assigned(workspace, people, "unanimous")
    _vote(t, people[1], "reject")
    assert _vote(t, people[2], "accept").stage == "vote"  # split, but unanimous waits for all k
    client = client_for("annotator")
    page = client.get(f"/trajectories/{t.pk}/").content.decode()
    assert "voter1" not in page and "voter2" not in page
    assert client.get(f"/api/v1/trajectories/{t.pk}/").json()["reviews"] == []
    assert len(client_for("reviewer").get(f"/api/v1/trajectories/{t.pk}/").json()["reviews"]) == 2
    assert _vote(t, people[0], "accept").stage == "disputed"


def test_a_vote_takes_no_fix_and_a_changed_mind_replaces_the_vote(voters):
    workspace, people = voters
    t, _ = _assigned(workspace, people, "unanimous")
    with pytest.raises(ReviewError, match="accept or reject"):
        review_decide(trajectory=t, reviewer=people[0], decision="fix_accept", expected_version=1, messages=[])
    _vote(t, people[0], "reject")
    _vote(t, people[0], "accept")
    assert Review.objects.filter(trajectory=t, stage="vote", undone_at=None).get().decision == "accept"
    _vote(t, people[1], "accept")
    assert _vote(t, people[2], "accept").stage == "consensus"
    assert_rollups_equal_a_recount()


def test_undoing_the_consensus_starts_the_vote_again_on_the_new_version(voters):
    workspace, people = voters
    t, _ = _assigned(workspace, people, "majority")
    _vote(t, people[0], "reject")
    decided = _vote(t, people[1], "reject")
    assert decided.stage == "consensus"
    review_undo(review=decided, actor=people[1])
    trajectory_release(trajectory_id=t.pk, user=people[1])  # an undo holds the item for its author
    t.refresh_from_db()
    assert t.status == TrajectoryStatus.JUDGED_PASS
    assert _vote(t, people[0], "accept").stage == "vote"  # the earlier votes were on an older version
    assert_rollups_equal_a_recount()


def test_an_unknown_rule_is_refused_and_gold_items_are_mixed_in_at_the_workspace_rate(voters):
    workspace, people = voters
    with pytest.raises(ValidationFailed, match="no consensus rule"):
        assign_to_vote([make_trajectory().pk], people, rule="loudest", workspace=workspace)
    gold = [make_trajectory(judge=verdict(passed=True)) for _ in range(30)]
    for g in gold:
        gold_mark(trajectory=g, expected_decision="accept", explanation="fine", actor=None)
    workspace.gold_rate = 0.5
    workspace.save(update_fields=["gold_rate"])
    items = [make_trajectory() for _ in range(10)]
    made = assign_to_vote([t.pk for t in items], people, rule="majority", workspace=workspace)
    assert made["assignments"] == 30 and made["gold"] == 15  # half of each person's 10
    # A gold item is answered as gold (it stays as it was), never as a vote.
    mixed = RatingAssignment.objects.filter(batch_id=made["batch"], trajectory__gold__isnull=False).first()
    answer = _vote(mixed.trajectory, mixed.annotator, "accept")
    assert answer.stage == "gold"
