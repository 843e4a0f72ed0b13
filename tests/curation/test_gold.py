"""Gold items: a curator marks one with its expected answer; an annotator meets it like any item (in the stream at the
workspace's gold rate), and once they have decided it learns the expected answer and why; their answers leave the
item as it was and make their accuracy, with its interval, on their quality page and over REST."""

import json

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.accounts.models import Workspace, default_workspace_id
from simia_web.accounts.services import user_create, workspace_create
from simia_web.calibration.services import assignments_create, rating_save
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import GoldItem, Review, Trajectory, TrajectoryStatus
from simia_web.curation.selectors.quality import annotator_quality, wilson
from simia_web.curation.services import gold_mark, review_decide
from tests.conftest import PASSWORD
from tests.curation.test_rollups import assert_rollups_equal_a_recount
from tests.support.factories import make_trajectory, verdict

HTMX = {"HTTP_HX_REQUEST": "true"}


def test_a_gold_answer_measures_the_annotator_and_leaves_the_item(client_for, users):
    # client_for logs the one test client in as each role in turn.
    gold, other = make_trajectory(judge=verdict(passed=True)), make_trajectory(judge=verdict(passed=True))
    client = client_for("curator")
    client.post(f"/trajectories/{gold.pk}/gold/", {"expected_decision": "reject", "explanation": "Wrong card."})
    assert 'id="gold-card"' in client.get(f"/trajectories/{gold.pk}/").content.decode()

    client = client_for("annotator")
    page = client.get(f"/trajectories/{gold.pk}/").content.decode()
    assert "gold" not in page.lower() and "Wrong card" not in page
    response = client.post(f"/trajectories/{gold.pk}/decide/", {"decision": "accept", "version": 1})
    assert response.status_code == 302
    after = client.get(response["Location"]).content.decode()
    assert "That was a gold item" in after and "reject" in after and "Wrong card." in after
    gold.refresh_from_db()
    assert (gold.status, gold.version) == (TrajectoryStatus.JUDGED_PASS, 1)  # as it was
    answer = Review.objects.get(trajectory=gold)
    assert (answer.stage, answer.gold_correct, answer.standing) == ("gold", False, False)
    client.post(f"/trajectories/{gold.pk}/decide/", {"decision": "reject", "version": 1, "reason": "card"})
    assert_rollups_equal_a_recount()
    # The first answer on each gold item counts.
    quality = client.get(f"/review/annotators/{users['annotator'].pk}/").context["quality"]
    assert (quality.gold_answered, quality.gold_correct, quality.accuracy) == (1, 0, 0.0)
    assert quality.interval == wilson(0, 1)
    assert client.get(f"/review/annotators/{users['reviewer'].pk}/").status_code == 403
    assert client.get(f"/api/v1/annotators/{users['reviewer'].pk}/quality/").status_code == 403

    # Another annotator learns nothing of it from the page or REST before deciding.
    client = client_for("reviewer")
    assert "gold" not in client.get(f"/trajectories/{gold.pk}/").content.decode().lower()
    assert client.get(f"/api/v1/trajectories/{gold.pk}/").json()["reviews"] == []

    client = client_for("curator")
    body = client.get(f"/api/v1/annotators/{users['annotator'].pk}/quality/").json()
    assert body["gold"]["answered"] == 1 and body["gold"]["interval95"][1] > 0.5
    assert "0%" in client.get(f"/review/annotators/{users['annotator'].pk}/").content.decode()
    # A curator's decision on a gold item is an ordinary decision.
    client.post(f"/trajectories/{other.pk}/gold/", {"expected_decision": "accept"})
    assert GoldItem.objects.filter(trajectory=other).exists()
    client.post(f"/trajectories/{other.pk}/decide/", {"decision": "accept", "version": 1})
    assert Trajectory.objects.get(pk=other.pk).status == TrajectoryStatus.ACCEPTED


def test_the_stream_mixes_in_gold_the_annotator_has_not_answered(client_for, users):
    Workspace.objects.filter(slug="default").update(gold_rate=1.0)
    plain = make_trajectory(judge=verdict(passed=False, confidence=0.99))  # first in the queue's order
    gold = make_trajectory(judge=verdict(passed=True))
    client_for("curator").post(f"/trajectories/{gold.pk}/gold/", {"expected_decision": "accept"})
    annotator = client_for("annotator")
    first = annotator.post("/review/next/")
    assert first["Location"].startswith(f"/trajectories/{gold.pk}/")
    annotator.post(f"/trajectories/{gold.pk}/decide/?stream=1", {"decision": "accept", "version": 1})
    assert Review.objects.get(trajectory=gold).gold_correct is True
    assert annotator.post("/review/next/")["Location"].startswith(f"/trajectories/{plain.pk}/")


def test_another_workspaces_people_and_gold_are_not_found(client, users):
    workspace_create(slug="team-b", name="Team B")
    gold = make_trajectory(judge=verdict(passed=True))
    outsider = user_create(username="outsider", role="admin", password=PASSWORD, workspaces=["team-b"])
    client.force_login(outsider)
    assert client.post(f"/trajectories/{gold.pk}/gold/", {"expected_decision": "accept"}).status_code == 404
    assert client.get(f"/review/annotators/{users['annotator'].pk}/").status_code == 404
    assert client.get(f"/api/v1/annotators/{users['annotator'].pk}/quality/").status_code == 404
    assert not GoldItem.objects.exists()


def test_curators_set_the_gold_rate(client_for, users):
    curator = client_for("curator")
    curator.post("/guidelines/", {"action": "gold_rate", "gold_percent": "12.5"})
    assert Workspace.objects.get(slug="default").gold_rate == 0.125
    curator.post("/guidelines/", {"action": "gold_rate", "gold_percent": "250"})
    assert Workspace.objects.get(slug="default").gold_rate == 0.125
    assert client_for("annotator").post("/guidelines/", {"action": "gold_rate", "gold_percent": "1"}).status_code == 403


def test_below_the_qualification_decisions_go_to_the_reviewer_stage(client_for, users):
    client = client_for("curator")
    client.post("/guidelines/", {"action": "qualification", "qualify_percent": "50", "qualify_window": "2"})
    assert Workspace.objects.get(slug="default").qualify_accuracy == 0.5
    golds = [make_trajectory(judge=verdict(passed=True)) for _ in range(2)]
    for t in golds:
        client.post(f"/trajectories/{t.pk}/gold/", {"expected_decision": "accept"})
    items = [make_trajectory(judge=verdict(passed=True)) for _ in range(3)]
    annotator = users["annotator"]
    # Fewer answers than the window: not qualified, though the stage is off.
    assert review_decide(trajectory=items[0], reviewer=annotator, decision="accept", expected_version=1).stage
    review_decide(trajectory=golds[0], reviewer=annotator, decision="reject", reason="no", expected_version=1)
    review_decide(trajectory=golds[1], reviewer=annotator, decision="accept", expected_version=1)
    # One of the last two right: 50%, qualified.
    assert not review_decide(trajectory=items[1], reviewer=annotator, decision="accept", expected_version=1).stage
    assert not review_decide(
        trajectory=items[2], reviewer=users["reviewer"], decision="accept", expected_version=1
    ).stage


def test_expected_ratings_are_shown_beside_the_annotators_own_once_they_have_answered(client_for, users):
    gold = make_trajectory(judge=verdict(passed=True))
    curator = client_for("curator")
    refused = curator.post(
        f"/trajectories/{gold.pk}/gold/",
        {"expected_decision": "reject", "expected-policy_followed": "0.35", "explanation": "Refunded twice."},
        follow=True,
    )
    assert "policy_followed: a number from 0 to 1 in tenths" in refused.content.decode()
    assert not GoldItem.objects.exists()
    curator.post(
        f"/trajectories/{gold.pk}/gold/",
        {
            "expected_decision": "reject",
            "expected-policy_followed": "0.2",
            "expected-task_completed": "1.0",
            "explanation": "Refunded twice.",
        },
    )
    assert GoldItem.objects.get().expected_scores == {"policy_followed": 0.2, "task_completed": 1.0}
    form = curator.get(f"/trajectories/{gold.pk}/").content.decode()
    assert 'name="expected-policy_followed"' in form and '<option value="0.2" selected>' in form

    annotator = client_for("annotator")
    rating_save(trajectory_id=gold.pk, annotator=users["annotator"], text_version=1, scores={"policy_followed": 0.5})
    before = annotator.get(f"/trajectories/{gold.pk}/").content.decode()
    assert "gold-feedback" not in before and "Expected ratings" not in before and "Refunded twice" not in before
    decided = annotator.post(f"/trajectories/{gold.pk}/decide/", {"decision": "reject", "version": 1, "reason": "x"})
    notice = annotator.get(decided["Location"]).content.decode()
    assert "Expected ratings: task_completed 1.0, policy_followed 0.2 (yours 0.5, off by 0.3)." in notice
    page = annotator.get(f"/trajectories/{gold.pk}/")
    feedback = page.context["gold_feedback"]
    assert (feedback.correct, feedback.expected_decision, feedback.explanation) == (True, "reject", "Refunded twice.")
    assert [(g.criterion, g.expected, g.rated, g.off) for g in feedback.grades] == [
        ("task_completed", 1.0, None, None),
        ("policy_followed", 0.2, 0.5, 0.3),
    ]
    assert 'id="gold-grades"' in page.content.decode()
    # Another annotator who has not answered still learns nothing.
    assert client_for("reviewer").get(f"/trajectories/{gold.pk}/").context["gold_feedback"] is None


def test_expected_ratings_are_checked_by_the_service(users):
    gold = make_trajectory(judge=verdict(passed=True))
    for scores, said in (
        ({"kindness": 0.5}, "no criterion named kindness"),
        ({"task_completed": 1.5}, "task_completed: a number from 0 to 1 in tenths"),
        ({"task_completed": True}, "task_completed: a number from 0 to 1 in tenths"),
    ):
        with pytest.raises(ValidationFailed) as refused:
            gold_mark(
                trajectory=gold,
                expected_decision="accept",
                explanation="",
                actor=users["curator"],
                expected_scores=scores,
            )
        assert refused.value.field == "expected_scores" and said in str(refused.value)
    assert not GoldItem.objects.exists()


def _json(client, method: str, path: str, body: dict | None = None):
    return client.generic(method.upper(), path, json.dumps(body or {}), content_type="application/json")


def test_curators_mark_read_list_and_unmark_gold_over_rest_and_nobody_else_learns_of_it(client_for, users):
    gold = make_trajectory(judge=verdict(passed=True))
    url = f"/api/v1/trajectories/{gold.pk}/gold/"
    body = {"expected_decision": "reject", "expected_scores": {"policy_followed": 0.2}, "explanation": "Twice."}
    curator = client_for("curator")
    refused = _json(curator, "put", url, {**body, "expected_scores": {"policy_followed": 0.25}})
    assert refused.status_code == 400
    assert "policy_followed: a number from 0 to 1 in tenths" in refused.json()["expected_scores"][0]
    assert _json(curator, "put", url, {"expected_scores": {}}).json().keys() == {"expected_decision"}
    assert curator.get(url).status_code == 404 and not GoldItem.objects.exists()
    marked = _json(curator, "put", url, body)
    assert marked.status_code == 200
    assert {k: marked.json()[k] for k in (*body, "trajectory", "domain", "created_by")} == {
        **body,
        "trajectory": gold.pk,
        "domain": gold.domain.name,
        "created_by": "curator",
    }
    assert curator.get(url).json() == marked.json()
    changed = _json(curator, "put", url, {"expected_decision": "accept"}).json()
    assert (changed["expected_decision"], changed["expected_scores"], changed["explanation"]) == ("accept", {}, "")
    listed = curator.get("/api/v1/gold/").json()
    assert [row["trajectory"] for row in listed["results"]] == [gold.pk]

    for role in ("annotator", "reviewer"):
        client = client_for(role)
        for method in ("get", "put", "delete"):
            assert _json(client, method, url, body).status_code == 403, (role, method)
        assert client.get("/api/v1/gold/").status_code == 403
        for read in (f"/api/v1/trajectories/{gold.pk}/", "/api/v1/trajectories/"):
            text = client.get(read).content.decode()
            assert "expected" not in text and "gold" not in text, (role, read)
    assert GoldItem.objects.get().expected_decision == "accept"

    workspace_create(slug="team-b", name="Team B")
    outsider = user_create(username="outsider", role="curator", password=PASSWORD, workspaces=["team-b"])
    client = client_for("annotator")
    client.force_login(outsider)
    for method in ("get", "put", "delete"):
        assert _json(client, method, url, body).status_code == 404, method
    assert client.get("/api/v1/gold/").json()["results"] == []

    curator = client_for("curator")
    assert curator.delete(url).status_code == 204
    assert curator.get(url).status_code == 404 and curator.delete(url).status_code == 404
    assert not GoldItem.objects.exists()


def test_agreement_with_other_annotators_pairs_first_answers_on_each_item_version(client_for, users):
    annotator, reviewer = users["annotator"], users["reviewer"]
    peers = [user_create(username=f"peer{i}", role="annotator", password=PASSWORD) for i in range(2)]

    def answer(t, person, decision):
        t.refresh_from_db()
        return review_decide(trajectory=t, reviewer=person, decision=decision, expected_version=t.version, reason="r")

    def measured(person) -> tuple:
        with CaptureQueriesContext(connection) as queries:
            quality = annotator_quality(annotator_id=person.pk, workspace_ids=[default_workspace_id()])
        return (quality.peer_items, quality.peer_pairs, quality.peer_agreed), len(queries)

    golds = [make_trajectory(judge=verdict(passed=True)) for _ in range(3)]
    for t in golds:
        gold_mark(trajectory=t, expected_decision="reject", explanation="", actor=users["curator"])
    assert measured(annotator)[0] == (0, 0, 0)
    answer(golds[0], annotator, "reject")
    answer(golds[0], annotator, "accept")  # the first answer counts
    answer(golds[0], reviewer, "reject")
    answer(golds[0], peers[0], "accept")
    answer(golds[1], annotator, "accept")  # nobody else answered it
    (pairs, queries) = measured(annotator)
    assert pairs == (1, 2, 1)

    # Consensus votes, the deciding one (a consensus decision on the next version) among them.
    voted = make_trajectory(judge=verdict(passed=True))
    assignments_create(
        trajectory_ids=[voted.pk],
        annotators=[annotator, *peers],
        overlap=3,
        actor=None,
        selection={},
        workspace=Workspace.objects.get(slug="default"),
        consensus="majority",
    )
    answer(voted, annotator, "accept")
    answer(voted, peers[0], "reject")
    assert answer(voted, peers[1], "accept").stage == "consensus"
    answer(golds[2], peers[1], "reject")
    answer(golds[2], annotator, "reject")
    assert measured(annotator) == ((3, 5, 3), queries)  # as many queries with more items
    assert measured(peers[0])[0] == (2, 4, 0)

    body = client_for("curator").get(f"/api/v1/annotators/{annotator.pk}/quality/").json()["annotators"]
    assert {k: body[k] for k in ("items", "pairs", "agreed", "agreement")} == {
        "items": 3,
        "pairs": 5,
        "agreed": 3,
        "agreement": 0.6,
    }
    assert body["interval95"] == list(wilson(3, 5))
    page = client_for("annotator").get(f"/review/annotators/{annotator.pk}/").content.decode()
    assert 'id="peer-agreement"' in page and "3 of 5 pairs" in page
