"""Guidelines: versioned Markdown per domain or workspace default, shown beside items, recorded on every decision
and rating, and the decisions made under older guidelines found and sent back for review."""

import pytest

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import user_create, workspace_create
from simia_web.calibration.services import rating_save
from simia_web.catalog.guidelines import guidelines_in_force, guidelines_revert, guidelines_save
from simia_web.catalog.services import domain_ensure
from simia_web.core.errors import ValidationFailed, VersionConflict
from simia_web.curation.models import Review, TrajectoryStatus
from simia_web.curation.services import review_decide, reviews_bulk, reviews_send_back
from tests.conftest import PASSWORD
from tests.support.factories import make_trajectory, verdict


def _default() -> Workspace:
    return Workspace.objects.get(slug="default")


def test_guidelines_are_versioned_inherited_and_reverted(users):
    shop = domain_ensure(name="shop")
    workspace = _default()
    assert guidelines_in_force(domain_id=shop.pk).guidelines is None
    default = guidelines_save(
        workspace_id=workspace.pk, domain=None, text="# Rules\nBe exact.", expected_version=0, actor=users["curator"]
    )
    force = guidelines_in_force(domain_id=shop.pk)
    assert (force.guidelines, force.inherited, force.version) == (default, True, 1)
    with pytest.raises(ValidationFailed):  # a first version names 0
        guidelines_save(workspace_id=workspace.pk, domain=shop, text="x", expected_version=3, actor=users["curator"])
    own = guidelines_save(workspace_id=workspace.pk, domain=shop, text="v1", expected_version=0, actor=users["curator"])
    guidelines_save(workspace_id=workspace.pk, domain=shop, text="v2", expected_version=1, actor=users["curator"])
    with pytest.raises(VersionConflict):
        guidelines_save(workspace_id=workspace.pk, domain=shop, text="late", expected_version=1, actor=users["curator"])
    own.refresh_from_db()
    assert (own.text, own.version) == ("v2", 2)
    assert guidelines_in_force(domain_id=shop.pk).stamp == {"guidelines_id": own.pk, "guidelines_version": 2}
    guidelines_revert(guidelines=own, to_version=1, expected_version=2, actor=users["curator"])
    own.refresh_from_db()
    assert (own.text, own.version) == ("v1", 3)


def test_pages_render_guidelines_escaped_and_only_curators_write(client_for, users):
    shop = domain_ensure(name="shop")
    t = make_trajectory(judge=verdict(passed=False))
    client = client_for("curator")
    response = client.post(
        "/domains/shop/guidelines/", {"text": "**Bold** <script>alert(1)</script>", "version": "0", "note": "first"}
    )
    assert response.status_code == 302
    page = client.get("/domains/shop/guidelines/").content.decode()
    assert "<strong>Bold</strong>" in page and "<script>alert(1)" not in page and "&lt;script&gt;" in page
    stale = client.post("/domains/shop/guidelines/", {"text": "other", "version": "0"})
    assert stale.status_code == 409 and b"Not saved" in stale.content
    client.post("/domains/shop/guidelines/", {"text": "second", "version": "1"})
    assert b"Bring back v1" in client.get("/domains/shop/guidelines/").content
    client.post("/domains/shop/guidelines/", {"action": "revert", "to_version": "1", "version": "2"})
    assert guidelines_in_force(domain_id=shop.pk).version == 3
    # The panel beside the item, on the review page and in the editor.
    for url in (f"/trajectories/{t.pk}/", f"/trajectories/{t.pk}/edit/"):
        body = client.get(url).content.decode()
        assert 'id="guidelines-panel"' in body and "<strong>Bold</strong>" in body and "version 3" in body
    annotator = client_for("annotator")
    assert annotator.get("/guidelines/").status_code == 200
    assert annotator.post("/guidelines/", {"text": "mine", "version": "0"}).status_code == 403


def test_decisions_and_ratings_record_the_guidelines_in_force(users):
    shop = domain_ensure(name="shop")
    workspace = _default()
    a, b, c = (make_trajectory(judge=verdict(passed=True)) for _ in range(3))
    review_decide(trajectory=a, reviewer=users["annotator"], decision="accept", expected_version=1)
    assert Review.objects.get(trajectory=a).guidelines_id is None
    default = guidelines_save(workspace_id=workspace.pk, domain=None, text="d", expected_version=0, actor=None)
    review = review_decide(trajectory=b, reviewer=users["annotator"], decision="accept", expected_version=1)
    assert (review.guidelines_id, review.guidelines_version) == (default.pk, 1)
    own = guidelines_save(workspace_id=workspace.pk, domain=shop, text="own", expected_version=0, actor=None)
    reviews_bulk(trajectories=type(c).objects.filter(pk=c.pk), reviewer=users["curator"], decision="accept")
    assert Review.objects.filter(trajectory=c).values_list("guidelines_id", "guidelines_version").get() == (own.pk, 1)
    rating = rating_save(
        trajectory_id=c.pk, annotator=users["annotator"], text_version=1, scores={"task_completed": 0.5}
    )
    assert (rating.guidelines_id, rating.guidelines_version) == (own.pk, 1)


def test_older_guidelines_filter_and_bulk_send_back(client_for, users):
    shop = domain_ensure(name="shop")
    workspace = _default()
    guidelines_save(workspace_id=workspace.pk, domain=shop, text="v1", expected_version=0, actor=None)
    old, current, waiting = (make_trajectory(judge=verdict(passed=True)) for _ in range(3))
    review_decide(trajectory=old, reviewer=users["annotator"], decision="accept", expected_version=1)
    guidelines_save(workspace_id=workspace.pk, domain=shop, text="v2", expected_version=1, actor=None)
    review_decide(trajectory=current, reviewer=users["annotator"], decision="reject", expected_version=1, reason="no")
    client = client_for("curator")
    page = client.get("/review/?guidelines=older").content.decode()
    assert f"/trajectories/{old.pk}/" in page
    assert f"/trajectories/{current.pk}/" not in page and f"/trajectories/{waiting.pk}/" not in page
    response = client.post(
        "/review/bulk/", {"action": "send_back", "scope": "all", "query": "guidelines=older", "reason": "rules changed"}
    )
    assert response.status_code == 302
    old.refresh_from_db()
    assert old.status == TrajectoryStatus.JUDGED_PASS and old.version == 3
    assert not Review.objects.filter(trajectory=old, superseded_at__isnull=True).exists()
    assert old.changes.last().action == "send_back"
    assert f"/trajectories/{old.pk}/" not in client.get("/review/?guidelines=older").content.decode()
    outcome = reviews_send_back(trajectories=type(old).objects.filter(pk=waiting.pk), actor=users["curator"])
    assert (outcome.sent_back, outcome.undecided) == (0, 1)
    assert client_for("annotator").post("/review/bulk/", {"action": "send_back", "scope": "all"}).status_code == 403


def test_rest_guidelines_get_and_put_with_the_expected_version(client, users):
    domain_ensure(name="shop")
    team_b = workspace_create(slug="team-b", name="Team B")
    domain_ensure(name="bank", workspace_id=team_b.pk)
    client.force_login(users["curator"])
    guidelines_save(workspace_id=_default().pk, domain=None, text="default", expected_version=0, actor=None)
    body = client.get("/api/v1/domains/shop/guidelines/").json()
    assert (body["text"], body["version"], body["inherited"], body["in_force_version"]) == ("default", 0, True, 1)
    put = client.put("/api/v1/domains/shop/guidelines/", {"text": "own", "version": 0}, content_type="application/json")
    assert put.status_code == 200 and put.json()["version"] == 1 and not put.json()["inherited"]
    stale = client.put("/api/v1/domains/shop/guidelines/", {"text": "x", "version": 0}, content_type="application/json")
    assert stale.status_code == 409 and stale.json()["version"] == 1
    missing = client.put("/api/v1/domains/shop/guidelines/", {"text": "x"}, content_type="application/json")
    assert missing.status_code == 400
    assert client.get("/api/v1/domains/bank/guidelines/").status_code == 404
    outsider = user_create(username="outsider", role="admin", password=PASSWORD, workspaces=["team-b"])
    client.force_login(outsider)
    assert client.get("/api/v1/domains/shop/guidelines/").status_code == 404
    put = client.put("/api/v1/domains/shop/guidelines/", {"text": "x", "version": 1}, content_type="application/json")
    assert put.status_code == 404
    client.force_login(users["annotator"])
    put = client.put("/api/v1/domains/shop/guidelines/", {"text": "x", "version": 1}, content_type="application/json")
    assert put.status_code == 403
