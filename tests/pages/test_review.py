"""Decisions, reservations, conflicts and bulk actions on the review pages."""

from datetime import timedelta

import pytest
from django.utils import timezone

from simia_web.core.models import AuditEvent, Revision
from simia_web.core.services import versioned_update
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from tests.pages.factories import make_trajectory, verdict

HTMX = {"HTTP_HX_REQUEST": "true"}


def decide(client, t, **data):
    data.setdefault("version", t.version)
    return client.post(f"/trajectories/{t.pk}/decide/", data, **HTMX)


def test_accept_writes_review_status_and_audit(client_for, users, trajectory):
    other = make_trajectory(judge=verdict(passed=False, score=0.5, confidence=0.5))
    response = decide(client_for("annotator"), trajectory, decision="accept")
    assert response.status_code == 200
    assert response["HX-Redirect"].startswith(f"/trajectories/{other.pk}/")
    trajectory.refresh_from_db()
    assert trajectory.status == TrajectoryStatus.ACCEPTED
    review = Review.objects.get(trajectory=trajectory)
    assert (review.decision, review.reviewer, review.trajectory_version) == ("accept", users["annotator"], 1)
    event = AuditEvent.objects.get(action="trajectory.status", target_id=str(trajectory.pk))
    assert event.data["to"] == "accepted" and event.actor == users["annotator"]


def test_reject_needs_a_reason(client_for, trajectory):
    client = client_for("annotator")
    response = decide(client, trajectory, decision="reject", reason="  ")
    assert "needs a reason" in response.content.decode()
    assert not Review.objects.exists()
    decide(client, trajectory, decision="reject", reason="wrong order id")
    trajectory.refresh_from_db()
    assert trajectory.status == TrajectoryStatus.REJECTED
    assert Review.objects.get().reason == "wrong order id"


def test_fix_and_accept_per_message_text_is_a_revision(client_for, trajectory):
    client = client_for("annotator")
    response = decide(client, trajectory, decision="fix_accept", mode="text", **{"content-4": "Done: W1 is cancelled."})
    assert response.status_code == 200 and "HX-Redirect" in response
    trajectory.refresh_from_db()
    assert trajectory.version == 2 and trajectory.status == TrajectoryStatus.ACCEPTED
    assert trajectory.messages[4]["content"] == "Done: W1 is cancelled."
    assert trajectory.messages[2]["tool_calls"][0]["function"]["name"] == "cancel_order"
    revisions = Revision.objects.filter(object_id=trajectory.pk).order_by("version")
    assert [r.version for r in revisions] == [1, 2]
    assert revisions[1].changes == [{"op": "replace", "path": "/messages/4/content", "value": "Done: W1 is cancelled."}]
    assert Review.objects.get().decision == "fix_accept" and Review.objects.get().trajectory_version == 2


def test_fix_and_accept_as_json(client_for, trajectory):
    import json

    edited = trajectory.messages[:2] + [{"role": "assistant", "content": "I cannot do that."}]
    decide(client_for("annotator"), trajectory, decision="fix_accept", mode="json", messages_json=json.dumps(edited))
    trajectory.refresh_from_db()
    assert trajectory.messages == edited


def test_invalid_json_edit_is_refused(client_for, trajectory):
    response = decide(client_for("annotator"), trajectory, decision="fix_accept", mode="json", messages_json="[{")
    assert "not valid JSON" in response.content.decode()
    trajectory.refresh_from_db()
    assert trajectory.version == 1 and trajectory.status == TrajectoryStatus.JUDGED_FAIL


def test_stale_version_is_refused_and_nothing_is_overwritten(client_for, trajectory):
    client = client_for("annotator")
    edited = [dict(m) for m in trajectory.messages]
    edited[4]["content"] = "someone else's fix"
    versioned_update(obj=trajectory, expected_version=1, fields={"messages": edited})
    response = decide(client, trajectory, version=1, decision="fix_accept", mode="text", **{"content-4": "mine"})
    body = response.content.decode()
    assert "someone else changed this trajectory" in body
    assert "it is now version 2" in body
    assert ">mine</textarea>" in body  # what the annotator typed is still there to copy
    trajectory.refresh_from_db()
    assert trajectory.messages[4]["content"] == "someone else's fix"
    assert not Review.objects.exists()
    # A plain (non-htmx) post gets the whole page with 409.
    response = client.post(f"/trajectories/{trajectory.pk}/decide/", {"version": 1, "decision": "accept"})
    assert response.status_code == 409


def test_opening_reserves_and_others_see_it(client, users, trajectory, settings):
    settings.SIMIA_RESERVATION_MINUTES = 10
    client.force_login(users["annotator"])
    client.get(f"/trajectories/{trajectory.pk}/")
    trajectory.refresh_from_db()
    assert trajectory.reserved_by == users["annotator"]
    assert trajectory.reserved_until > timezone.now() + timedelta(minutes=9)

    client.force_login(users["curator"])
    body = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "Reserved by" in body and "annotator" in body
    trajectory.refresh_from_db()
    assert trajectory.reserved_by == users["annotator"]  # not stolen
    response = decide(client, trajectory, decision="accept")
    assert "is reviewing this trajectory" in response.content.decode()
    assert not Review.objects.exists()
    assert "annotator" in client.get("/review/").content.decode()  # shown in the queue


def test_reservations_expire(client, users, trajectory):
    Trajectory.objects.filter(pk=trajectory.pk).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() - timedelta(seconds=1)
    )
    client.force_login(users["curator"])
    assert "Reserved by" not in client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    trajectory.refresh_from_db()
    assert trajectory.reserved_by == users["curator"]


def test_queue_order_and_filters(client_for):
    passed = make_trajectory(judge=verdict(passed=True, score=0.95, confidence=0.9))
    weak_fail = make_trajectory(judge=verdict(passed=False, score=0.5, confidence=0.4))
    strong_fail = make_trajectory(judge=verdict(passed=False, score=0.2, confidence=0.95))
    rules = make_trajectory(violations=["unknown_tool"])
    low = make_trajectory(judge=verdict(passed=True, score=0.71, confidence=0.6))
    other_domain = make_trajectory("bank", judge=verdict(), messages=None)
    client = client_for("annotator")
    page = client.get("/review/").context["page"]
    assert [t.pk for t in page] == [strong_fail.pk, weak_fail.pk, rules.pk, passed.pk, other_domain.pk, low.pk]

    def ids(**params):
        return {t.pk for t in client.get("/review/", params).context["page"]}

    assert ids(verdict="fail") == {strong_fail.pk, weak_fail.pk}
    assert ids(violation="unknown_tool") == {rules.pk}
    assert ids(score_min=0.6, score_max=0.8) == {low.pk}
    assert ids(domain=other_domain.domain_id) == {other_domain.pk}
    assert ids(q="(3)") == {strong_fail.pk} or ids(q="cancel order") >= {strong_fail.pk}
    Trajectory.objects.filter(pk=passed.pk).update(status=TrajectoryStatus.REJECTED)
    assert passed.pk not in ids()
    assert passed.pk in ids(status="rejected")
    # A disagreement (judge pass, human reject) sorts before plain items when all statuses are shown.
    order = [t.pk for t in client.get("/review/", {"status": "all"}).context["page"]]
    assert order.index(passed.pk) < order.index(low.pk)


def test_text_search_over_messages(client_for):
    target = make_trajectory(messages=None, judge=verdict())
    Trajectory.objects.filter(pk=target.pk).update(messages=[{"role": "user", "content": "refund the zebra lamp"}])
    make_trajectory(judge=verdict())
    page = client_for("annotator").get("/review/", {"q": "Zebra"}).context["page"]
    assert [t.pk for t in page] == [target.pk]


def test_neighbours_follow_the_queue(client_for):
    a = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    b = make_trajectory(judge=verdict(passed=False, confidence=0.5))
    c = make_trajectory(judge=verdict(passed=True))
    context = client_for("annotator").get(f"/trajectories/{b.pk}/").context
    assert (context["previous_id"], context["next_id"], context["position"]) == (a.pk, c.pk, 2)


def test_bulk_accept_selected_and_reject_all_filtered(client_for, users):
    a, b = make_trajectory(judge=verdict()), make_trajectory(judge=verdict())
    fails = [make_trajectory(judge=verdict(passed=False)) for _ in range(3)]
    client = client_for("curator")
    response = client.post("/review/bulk/", {"action": "accept", "scope": "selected", "ids": [a.pk, b.pk]})
    assert response.status_code == 302
    assert set(Trajectory.objects.filter(status="accepted").values_list("pk", flat=True)) == {a.pk, b.pk}
    assert Review.objects.filter(decision="accept").count() == 2
    client.post("/review/bulk/", {"action": "reject", "scope": "all", "query": "verdict=fail"})
    assert Trajectory.objects.filter(status="rejected").count() == 0  # a reason is required
    client.post("/review/bulk/", {"action": "reject", "scope": "all", "query": "verdict=fail", "reason": "bad"})
    assert set(Trajectory.objects.filter(status="rejected").values_list("pk", flat=True)) == {t.pk for t in fails}
    assert AuditEvent.objects.filter(action="trajectory.status", data__bulk=True).count() == 5


def test_bulk_skips_items_reserved_by_someone_else(client_for, users):
    held, free = make_trajectory(judge=verdict()), make_trajectory(judge=verdict())
    Trajectory.objects.filter(pk=held.pk).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() + timedelta(minutes=5)
    )
    client_for("curator").post("/review/bulk/", {"action": "accept", "scope": "all"})
    assert set(Trajectory.objects.filter(status="accepted").values_list("pk", flat=True)) == {free.pk}


def test_bulk_assign_and_mine_filter(client, users):
    a, b = make_trajectory(judge=verdict()), make_trajectory(judge=verdict())
    client.force_login(users["curator"])
    client.post(
        "/review/bulk/", {"action": "assign", "scope": "selected", "ids": [a.pk], "assignee": users["annotator"].pk}
    )
    a.refresh_from_db()
    assert a.assigned_to == users["annotator"]
    client.force_login(users["annotator"])
    assert [t.pk for t in client.get("/review/", {"mine": "on"}).context["page"]] == [a.pk]
    assert b.pk


@pytest.mark.parametrize("n", [5, 60])
def test_queue_queries_are_bounded(client_for, django_assert_max_num_queries, n):
    for i in range(n):
        make_trajectory(judge=verdict(passed=i % 2 == 0), violations=["unknown_tool"] if i % 3 == 0 else ())
    client = client_for("curator")
    with django_assert_max_num_queries(12):
        response = client.get("/review/", {"status": "all", "q": "cancel"})
    assert response.status_code == 200


def test_trajectory_page_queries_are_bounded(client_for, django_assert_max_num_queries):
    t = make_trajectory(judge=verdict(), violations=["unknown_tool", "missing_result"])
    for _ in range(30):
        make_trajectory(judge=verdict())
    client = client_for("annotator")
    with django_assert_max_num_queries(20):
        assert client.get(f"/trajectories/{t.pk}/").status_code == 200


def test_trajectory_page_shows_the_review_material(client_for):
    t = make_trajectory(
        judge=verdict(passed=False, rationale="The agent skipped confirmation.", cited=[4]), violations=["no_confirm"]
    )
    body = client_for("annotator").get(f"/trajectories/{t.pk}/").content.decode()
    assert "cancel_order" in body and "&quot;order_id&quot;: &quot;W1&quot;" in body  # pretty-printed arguments
    assert "/orders/W1/status" in body  # the state patch
    assert 'class="del">-      &quot;status&quot;: &quot;pending&quot;' in body  # state after as a diff
    assert "The agent skipped confirmation." in body and "no_confirm" in body
    assert 'id="m4"' in body and "cited by judge" in body


def test_llm_text_is_escaped(client_for):
    payload = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'
    t = make_trajectory(judge=verdict(rationale=payload), messages=None)
    Trajectory.objects.filter(pk=t.pk).update(messages=[{"role": "assistant", "content": payload}])
    body = client_for("annotator").get(f"/trajectories/{t.pk}/").content.decode()
    assert "<script>window.__pwned" not in body and "<img src=x" not in body
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in body
