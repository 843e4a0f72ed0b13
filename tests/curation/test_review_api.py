"""Review over REST: the same services and rules as the pages, for scripts and pre-review tools."""

import json

import pytest

from simia_web.accounts.services import user_token
from simia_web.curation.models import Review, TrajectoryStatus
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db
API = "/api/v1/trajectories"


@pytest.fixture
def as_role(client, users):
    def make(role: str):
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {user_token(user=users[role])}"
        return client

    return make


def post(client, path: str, body: dict):
    return client.post(path, json.dumps(body), content_type="application/json")


def test_detail_shows_the_version_and_the_decision_with_the_version_it_was_made_on(as_role):
    t = make_trajectory(judge=verdict(passed=False))
    client = as_role("annotator")
    detail = client.get(f"{API}/{t.pk}/").json()
    assert (detail["version"], detail["text_version"], detail["status"], detail["decision"]) == (
        1,
        1,
        "judged_fail",
        None,
    )
    created = post(client, f"{API}/{t.pk}/reviews/", {"decision": "accept", "version": 1})
    assert created.status_code == 201
    body = created.json()
    assert (body["decision"], body["based_on_version"], body["trajectory_version"]) == ("accept", 1, 2)
    assert (body["status"], body["version"], body["reviewer"]) == ("accepted", 2, "annotator")
    detail = client.get(f"{API}/{t.pk}/").json()
    assert detail["version"] == 2 and detail["status"] == "accepted"
    assert detail["decision"]["based_on_version"] == 1 and detail["decision"]["standing"] is True


def test_a_stale_version_is_409_naming_what_changed_and_by_whom(as_role):
    t = make_trajectory(judge=verdict(passed=False))
    post(as_role("curator"), f"{API}/{t.pk}/reviews/", {"decision": "reject", "version": 1, "reason": "off-policy"})
    refused = post(as_role("annotator"), f"{API}/{t.pk}/reviews/", {"decision": "accept", "version": 1})
    assert refused.status_code == 409
    body = refused.json()
    assert body["code"] == "stale_version" and body["version"] == 2
    assert body["changes"] == [
        {
            "version": 2,
            "action": "reject",
            "detail": "",
            "actor": "curator",
            "created_at": body["changes"][0]["created_at"],
        }
    ]
    assert "v2 rejected by curator" in body["detail"]
    assert Review.objects.count() == 1


def test_a_fix_over_rest_passes_the_editors_checks_and_a_refusal_names_the_field(as_role):
    t = make_trajectory(judge=verdict(passed=False))
    client = as_role("annotator")
    messages = json.loads(json.dumps(t.messages))
    messages[3].pop("tool_call_id")
    refused = post(client, f"{API}/{t.pk}/reviews/", {"decision": "fix", "version": 1, "messages": messages})
    assert refused.status_code == 400 and refused.json() == {"messages[3].tool_call_id": ["is missing"]}
    messages = json.loads(json.dumps(t.messages))
    messages[2]["tool_calls"][0]["function"]["arguments"] = json.dumps({"order_id": 7})
    refused = post(client, f"{API}/{t.pk}/reviews/", {"decision": "fix", "version": 1, "messages": messages})
    assert refused.status_code == 400
    assert "is not of type 'string'" in refused.json()["messages[2].tool_calls[0].function.arguments"][0]
    assert post(client, f"{API}/{t.pk}/reviews/", {"decision": "fix", "version": 1}).json() == {
        "messages": ["fix needs the corrected messages"]
    }
    assert "reason" in post(client, f"{API}/{t.pk}/reviews/", {"decision": "reject", "version": 1}).json()

    messages = json.loads(json.dumps(t.messages))
    messages[4]["content"] = "Order W1 is cancelled; the refund takes 5 days."
    fixed = post(client, f"{API}/{t.pk}/reviews/", {"decision": "fix", "version": 1, "messages": messages})
    assert fixed.status_code == 201 and fixed.json()["decision"] == "fix_accept"
    t.refresh_from_db()
    assert t.messages[4]["content"].endswith("5 days.") and t.text_version == 2
    assert t.status == TrajectoryStatus.ACCEPTED and not Review.objects.filter(decision="accept").exists()


def test_revert_over_rest_makes_the_item_undecided_and_respects_holds(as_role, users):
    t = make_trajectory(judge=verdict(passed=False))
    client = as_role("annotator")
    messages = json.loads(json.dumps(t.messages))
    messages[4]["content"] = "Fixed."
    post(client, f"{API}/{t.pk}/reviews/", {"decision": "fix", "version": 1, "messages": messages})
    reverted = post(client, f"{API}/{t.pk}/revert/", {"to_version": 1, "version": 2})
    assert reverted.status_code == 200
    assert reverted.json() == {"id": t.pk, "version": 3, "text_version": 3, "status": "judged_fail"}
    assert client.get(f"{API}/{t.pk}/").json()["decision"] is None
    assert post(client, f"{API}/{t.pk}/revert/", {"to_version": 3, "version": 3}).json() == {
        "to_version": ["Version 3's text is the current text."]
    }

    from simia_web.curation.services import trajectory_hold

    trajectory_hold(trajectory=t, user=users["curator"])
    held = post(client, f"{API}/{t.pk}/revert/", {"to_version": 2, "version": 3})
    assert held.status_code == 409 and held.json()["code"] == "held" and "curator is reviewing" in held.json()["detail"]
    assert post(client, f"{API}/{t.pk}/reviews/", {"decision": "accept", "version": 3}).status_code == 409


def test_review_endpoints_need_a_member(client, users):
    t = make_trajectory(judge=verdict(passed=False))
    assert post(client, f"{API}/{t.pk}/reviews/", {"decision": "accept", "version": 1}).status_code == 401
    assert post(client, f"{API}/{t.pk}/revert/", {"to_version": 1, "version": 1}).status_code == 401
