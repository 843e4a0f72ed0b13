"""The reviewer stage: off by default; where it is on, an annotator's decision awaits review (not accepted, not
exported, not in the agreement figures) until a reviewer confirms it, overturns it with a reason, or fixes and
confirms it, each a versioned, held and undoable decision."""

import pytest

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import user_create, workspace_create, workspace_review_stage_set
from simia_web.catalog.guidelines import domain_review_stage_set
from simia_web.catalog.services import domain_ensure
from simia_web.curation.models import Figure, Review, Rollup, Trajectory, TrajectoryStatus
from simia_web.curation.selectors.second_look import awaiting_review, overturn_rates
from simia_web.curation.services import review_decide, review_undo, reviews_bulk_undo
from simia_web.exports.selectors import DEFAULT_STATUS
from tests.conftest import PASSWORD
from tests.curation.test_review import editor_post
from tests.curation.test_rollups import assert_rollups_equal_a_recount
from tests.support.factories import make_trajectory, verdict


@pytest.fixture
def stage_on(users):
    workspace_review_stage_set(workspace=Workspace.objects.get(slug="default"), on=True, actor=users["admin"])


def _agreement() -> int:
    return sum(Rollup.objects.filter(figure=Figure.AGREEMENT).values_list("n", flat=True))


def test_off_by_default_an_annotators_decision_counts_at_once(users):
    t = make_trajectory(judge=verdict(passed=True))
    review = review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    assert (t.status, review.stage) == (TrajectoryStatus.ACCEPTED, "")


def test_an_annotators_decision_awaits_review_until_confirmed(client_for, users, stage_on):
    t = make_trajectory(judge=verdict(passed=True))
    other = make_trajectory(judge=verdict(passed=False))
    review = review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    assert (t.status, review.stage) == (TrajectoryStatus.AWAITING_REVIEW, "awaiting")
    assert t.status != DEFAULT_STATUS and _agreement() == 0  # not exported, not in the figures
    review_decide(trajectory=other, reviewer=users["annotator"], decision="accept", expected_version=1)
    # A reviewer's own decision needs no second look.
    mine = make_trajectory(judge=verdict(passed=True))
    assert review_decide(trajectory=mine, reviewer=users["reviewer"], decision="accept", expected_version=1).stage == ""

    client = client_for("reviewer")
    page = client.get("/review/second-look/").content.decode()
    assert page.index(f"#{other.pk}") < page.index(f"#{t.pk}")  # against the judge first
    body = client.get(f"/trajectories/{t.pk}/?second_look=1").content.decode()
    assert 'id="confirm-form"' in body and 'id="overturn-form"' in body
    response = client.post(f"/trajectories/{t.pk}/decide/?second_look=1", {"decision": "accept", "version": t.version})
    assert response.status_code == 302 and response["Location"] == f"/trajectories/{other.pk}/?second_look=1"
    t.refresh_from_db()
    review.refresh_from_db()
    assert t.status == TrajectoryStatus.ACCEPTED
    assert (review.stage, review.checked_by, review.standing) == ("confirmed", users["reviewer"], False)
    standing = Review.objects.get(trajectory=t, superseded_at__isnull=True)
    assert (standing.reviewer, standing.stage) == (users["reviewer"], "")
    assert _agreement() == 2
    assert_rollups_equal_a_recount()
    # Undoable as any decision: the item waits for a decision again.
    review_undo(review=standing, actor=users["reviewer"])
    t.refresh_from_db()
    assert t.status == TrajectoryStatus.JUDGED_PASS
    assert_rollups_equal_a_recount()
    assert client_for("annotator").get("/review/second-look/").status_code == 403


def test_overturn_needs_a_reason_and_the_annotator_reads_it(client_for, users, stage_on):
    t = make_trajectory(judge=verdict(passed=True))
    review = review_decide(
        trajectory=t, reviewer=users["annotator"], decision="reject", reason="bad", expected_version=1
    )
    client = client_for("reviewer")
    refused = client.post(f"/trajectories/{t.pk}/decide/", {"decision": "accept", "version": t.version})
    assert refused.status_code == 400 and b"needs a reason" in refused.content
    stale = client.post(f"/trajectories/{t.pk}/decide/", {"decision": "accept", "version": 1, "reason": "fine"})
    assert stale.status_code == 409
    client.post(
        f"/trajectories/{t.pk}/decide/", {"decision": "accept", "version": t.version, "reason": "the call is right"}
    )
    t.refresh_from_db()
    review.refresh_from_db()
    assert t.status == TrajectoryStatus.ACCEPTED
    assert (review.stage, review.check_reason) == ("overturned", "the call is right")
    page = client_for("annotator").get("/review/overturned/").content.decode()
    assert f"#{t.pk}" in page and "the call is right" in page and "reviewer" in page
    assert "the call is right" in client_for("annotator").get(f"/trajectories/{t.pk}/").content.decode()
    assert_rollups_equal_a_recount()


def test_fix_and_confirm_goes_through_the_strict_gate(client_for, users, stage_on):
    t = make_trajectory(judge=verdict(passed=True))
    review = review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    client = client_for("reviewer")
    bad = editor_post(t)
    bad["call-2-0-name"] = "no_such_tool"
    bad["then"] = "accept"
    assert client.post(f"/trajectories/{t.pk}/edit/", bad).status_code == 200  # refused, shown in the form
    t.refresh_from_db()
    assert t.status == TrajectoryStatus.AWAITING_REVIEW
    fixed = editor_post(t, **{"content-4": "Order W1 is cancelled; a refund follows."})
    fixed["then"] = "accept"
    client.post(f"/trajectories/{t.pk}/edit/", fixed)
    t.refresh_from_db()
    review.refresh_from_db()
    assert t.status == TrajectoryStatus.ACCEPTED and t.messages[4]["content"].endswith("a refund follows.")
    assert review.stage == "fixed"
    assert Review.objects.get(trajectory=t, superseded_at__isnull=True).decision == "fix_accept"


def test_a_domain_says_otherwise_than_its_workspace(client_for, users):
    shop = domain_ensure(name="shop")
    domain_review_stage_set(domain=shop, on=True, actor=users["curator"])
    t = make_trajectory(judge=verdict(passed=True))
    assert review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1).stage
    workspace_review_stage_set(workspace=Workspace.objects.get(slug="default"), on=True, actor=None)
    domain_review_stage_set(domain=shop, on=False, actor=users["curator"])
    u = make_trajectory(judge=verdict(passed=True))
    assert not review_decide(trajectory=u, reviewer=users["annotator"], decision="accept", expected_version=1).stage
    # The switch is on the guidelines pages, for curators.
    client = client_for("curator")
    client.post("/domains/shop/guidelines/", {"action": "review_stage", "review_stage": ""})
    shop.refresh_from_db()
    assert shop.review_stage is None
    assert (
        client_for("annotator").post("/guidelines/", {"action": "review_stage", "review_stage": "off"}).status_code
        == 403
    )


def test_another_workspaces_awaiting_decisions_are_not_shown(client, users, stage_on):
    team_b = workspace_create(slug="team-b", name="Team B")
    t = make_trajectory(judge=verdict(passed=True))
    review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    outsider = user_create(username="outsider", role="reviewer", password=PASSWORD, workspaces=["team-b"])
    client.force_login(outsider)
    assert f"#{t.pk}" not in client.get("/review/second-look/").content.decode()
    response = client.post(f"/trajectories/{t.pk}/decide/", {"decision": "accept", "version": t.version})
    assert response.status_code == 404
    assert Trajectory.objects.get(pk=t.pk).status == TrajectoryStatus.AWAITING_REVIEW
    assert team_b.pk


def test_confirm_the_rest_of_a_batch_on_a_sample(client_for, users, stage_on):
    items = [make_trajectory(judge=verdict(passed=True)) for _ in range(4)]
    for t in items:
        review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    client = client_for("reviewer")
    refused = client.post("/review/second-look/confirm-rest/", {"annotator": users["annotator"].pk})
    assert (
        refused.status_code == 302 and Trajectory.objects.filter(status=TrajectoryStatus.AWAITING_REVIEW).count() == 4
    )
    sampled = items[0]
    sampled.refresh_from_db()
    client.post(f"/trajectories/{sampled.pk}/decide/", {"decision": "accept", "version": sampled.version})
    page = client.get("/review/second-look/")
    [batch] = page.context["batches"]
    assert (batch.awaiting, batch.overturned, len(batch.sample)) == (3, 0, 1)
    client.post("/review/second-look/confirm-rest/", {"annotator": users["annotator"].pk, "sample": batch.sample})
    assert Trajectory.objects.filter(status=TrajectoryStatus.ACCEPTED).count() == 4
    confirmations = Review.objects.filter(bulk=True, reviewer=users["reviewer"], superseded_at__isnull=True)
    assert confirmations.count() == 3 and all(r.sample == batch.sample for r in confirmations)
    assert Review.objects.filter(reviewer=users["annotator"], stage="bulk").count() == 3
    assert_rollups_equal_a_recount()
    everywhere = list(Workspace.objects.values_list("pk", flat=True))
    undone = reviews_bulk_undo(batch=confirmations[0].batch, actor=users["reviewer"], workspace_ids=everywhere)
    assert undone.undone == 3
    assert_rollups_equal_a_recount()


def test_the_queue_puts_annotators_reviewers_often_overturn_first(client_for, users, stage_on):
    often = user_create(username="often", role="annotator", password=PASSWORD)
    for i in range(5):
        t = make_trajectory(judge=verdict(passed=True))
        review_decide(trajectory=t, reviewer=often, decision="accept", expected_version=1)
        answer = {"decision": "reject", "reason": "wrong card"} if i < 2 else {"decision": "accept"}
        review_decide(trajectory=t, reviewer=users["reviewer"], expected_version=t.version, **answer)
    first = make_trajectory(judge=verdict(passed=True))
    review_decide(trajectory=first, reviewer=users["annotator"], decision="accept", expected_version=1)
    later = make_trajectory(judge=verdict(passed=True))
    review_decide(trajectory=later, reviewer=often, decision="accept", expected_version=1)
    workspace_ids = [Workspace.objects.get(slug="default").pk]
    assert overturn_rates(workspace_ids=workspace_ids) == {often.pk: (2, 5)}
    order = [r.trajectory_id for r in awaiting_review(workspace_ids=workspace_ids)]
    assert order == [later.pk, first.pk]
    assert "40%" in client_for("reviewer").get("/review/second-look/").content.decode()
    assert_rollups_equal_a_recount()
