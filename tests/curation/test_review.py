"""Decisions, reservations, conflicts and bulk actions on the review pages."""

from datetime import timedelta

import pytest
from django.utils import timezone

from simia_web.core.models import AuditEvent, Revision
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import trajectory_edit
from tests.support.factories import make_trajectory, verdict

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
    # A decision is a version of its own: made on version 1, it made version 2.
    assert (review.decision, review.reviewer, review.based_on_version) == ("accept", users["annotator"], 1)
    assert review.trajectory_version == trajectory.version == 2
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


def editor_post(t, **changes) -> dict:
    """The editor's form for the trajectory's messages as they are, with `changes` applied (as the client posts it)."""
    from django.utils.datastructures import MultiValueDict

    data = MultiValueDict({"version": [str(t.version)], "msg": [str(i) for i in range(len(t.messages))]})
    for i, message in enumerate(t.messages):
        data[f"role-{i}"] = message["role"]
        data[f"content-{i}"] = message.get("content") or ""
        if message.get("tool_call_id"):
            data[f"tool_call_id-{i}"] = message["tool_call_id"]
        calls = message.get("tool_calls") or []
        data.setlist(f"call-{i}", [str(j) for j in range(len(calls))])
        for j, call in enumerate(calls):
            data[f"call-{i}-{j}-id"] = call["id"]
            data[f"call-{i}-{j}-name"] = call["function"]["name"]
            data[f"call-{i}-{j}-args"] = call["function"]["arguments"]
    for key, value in changes.items():
        data.setlist(key, value if isinstance(value, list) else [value])
    return dict(data.lists())


def edit(client, t, **changes):
    return client.post(f"/trajectories/{t.pk}/edit/", editor_post(t, **changes))


def test_editor_saves_text_and_tool_call_arguments_as_a_revision(client_for, trajectory):
    client = client_for("annotator")
    assert "call-2-0-args" in client.get(f"/trajectories/{trajectory.pk}/edit/").content.decode()
    response = edit(
        client, trajectory, **{"content-4": "Done: W1 is cancelled.", "call-2-0-args": '{"order_id": "W2"}'}
    )
    assert response.status_code == 302
    trajectory.refresh_from_db()
    assert trajectory.version == 2 and trajectory.status == TrajectoryStatus.ACCEPTED
    assert trajectory.messages[4]["content"] == "Done: W1 is cancelled."
    call = trajectory.messages[2]["tool_calls"][0]
    assert call["function"] == {"name": "cancel_order", "arguments": '{"order_id": "W2"}'} and call["id"] == "call_1"
    assert trajectory.messages[3]["tool_call_id"] == "call_1"
    revisions = Revision.objects.filter(object_id=trajectory.pk).order_by("version")
    assert [r.version for r in revisions] == [1, 2]
    assert Review.objects.get().decision == "fix_accept" and Review.objects.get().trajectory_version == 2
    body = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "Revert to v1" in body and "Done: W1 is cancelled." in body and "Order W1 is cancelled." in body


def test_editor_adds_removes_and_reorders_messages(client_for, trajectory):
    changes = {"msg": ["0", "1", "4", "new1"], "role-new1": "user", "content-new1": "Thanks!", "role-4": "assistant"}
    edit(client_for("annotator"), trajectory, **changes)
    trajectory.refresh_from_db()
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "user"]
    assert trajectory.messages[3]["content"] == "Thanks!" and trajectory.turns == 3 and trajectory.tool_call_count == 0


def test_editor_errors_sit_next_to_their_field_and_keep_the_text(client_for, trajectory):
    client = client_for("annotator")
    response = edit(client, trajectory, **{"call-2-0-args": "{", "content-4": "my careful fix"})
    body = response.content.decode()
    assert response.status_code == 200 and "Not valid JSON" in body and ">my careful fix</textarea>" in body
    response = edit(client, trajectory, **{"call-2-0-args": '{"order_id": 7}', "call-2-0-name": "cancel_order"})
    assert "wrong_type" not in response.content.decode() and "is not of type" in response.content.decode()
    response = edit(client, trajectory, **{"call-2-0-name": "refund_everything"})
    assert "no tool named" in response.content.decode()
    trajectory.refresh_from_db()
    assert trajectory.version == 1 and trajectory.status == TrajectoryStatus.JUDGED_FAIL


def test_inline_tool_call_check(client_for, trajectory):
    client = client_for("annotator")
    body = client.post(
        f"/trajectories/{trajectory.pk}/check-call/", {"call-2-0-name": "cancel_order", "call-2-0-args": "{}"}
    ).content.decode()
    assert "order_id" in body and 'data-for="call-2-0-args"' in body


def test_stale_version_is_refused_and_nothing_is_overwritten(client_for, users, trajectory):
    client = client_for("annotator")
    data = editor_post(trajectory, **{"content-4": "mine"})
    edited = [dict(m) for m in trajectory.messages]
    edited[4]["content"] = "someone else's fix"
    trajectory_edit(trajectory=trajectory, editor=users["curator"], messages=edited, expected_version=1)
    response = client.post(f"/trajectories/{trajectory.pk}/edit/", data)
    body = response.content.decode()
    assert response.status_code == 409 and "someone else changed this trajectory" in body
    assert "v2: edited by <strong>curator</strong>" in body
    assert ">mine</textarea>" in body  # what the annotator typed is still there to copy
    trajectory.refresh_from_db()
    assert trajectory.messages[4]["content"] == "someone else's fix"
    assert not Review.objects.exists()
    response = client.post(f"/trajectories/{trajectory.pk}/decide/", {"version": 1, "decision": "accept"})
    assert response.status_code == 409


def test_opening_a_link_only_views(client_for, users, trajectory):
    client_for("annotator").get(f"/trajectories/{trajectory.pk}/")
    trajectory.refresh_from_db()
    assert trajectory.reserved_by is None


def test_the_stream_claims_renews_and_releases(client, users, trajectory, settings):
    settings.SIMIA_RESERVATION_SECONDS = 60
    second = make_trajectory(judge=verdict(passed=False, score=0.4, confidence=0.5))
    client.force_login(users["annotator"])
    response = client.post("/review/next/")
    assert response.status_code == 302 and response["Location"] == f"/trajectories/{trajectory.pk}/?stream=1"
    trajectory.refresh_from_db()
    assert trajectory.reserved_by == users["annotator"]
    assert timezone.now() + timedelta(seconds=50) < trajectory.reserved_until < timezone.now() + timedelta(seconds=61)
    assert 'id="stream-bar"' in client.get(response["Location"]).content.decode()
    assert client.post(f"/trajectories/{trajectory.pk}/reservation/", {"action": "renew"}).json()["held"] is True

    # Another annotator sees who holds it, with the buttons off and the reason; the stream gives them the next one.
    client.force_login(users["curator"])
    body = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "Reserved by" in body and "annotator" in body and 'id="disabled-reason"' in body
    assert 'id="accept-btn" disabled' in body
    renewal = client.post(f"/trajectories/{trajectory.pk}/reservation/", {"action": "renew"}).json()
    assert (renewal["held"], renewal["holder"]) == (False, "annotator")
    response = decide(client, trajectory, decision="accept")
    assert response.status_code == 409 and "annotator is reviewing trajectory" in response.content.decode()
    assert not Review.objects.exists()
    assert client.post("/review/next/")["Location"] == f"/trajectories/{second.pk}/?stream=1"
    assert "annotator" in client.get("/review/").content.decode()  # shown in the queue

    # Skipping (j) moves the claim on; Release lets go.
    client.force_login(users["annotator"])
    assert client.post("/review/next/", {"after": trajectory.pk})["Location"] == "/review/"  # second is held
    trajectory.refresh_from_db()
    assert trajectory.reserved_by is None
    client.post("/review/next/")
    client.post(f"/trajectories/{trajectory.pk}/reservation/", {"action": "release"})
    trajectory.refresh_from_db()
    assert trajectory.reserved_by is None


def test_expired_reservations_are_claimable(client, users, trajectory):
    Trajectory.objects.filter(pk=trajectory.pk).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() - timedelta(seconds=1)
    )
    client.force_login(users["curator"])
    assert "Reserved by" not in client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    client.post("/review/next/")
    trajectory.refresh_from_db()
    assert trajectory.reserved_by == users["curator"]


def test_a_decision_in_the_stream_claims_the_next_item(client_for, users, trajectory):
    second = make_trajectory(judge=verdict(passed=False, score=0.4, confidence=0.5))
    client = client_for("annotator")
    client.post("/review/next/")
    response = client.post(
        f"/trajectories/{trajectory.pk}/decide/?stream=1", {"version": 1, "decision": "accept"}, **HTMX
    )
    assert response["HX-Redirect"] == f"/trajectories/{second.pk}/?stream=1"
    second.refresh_from_db()
    assert second.reserved_by == users["annotator"]


def test_undo_from_the_toast_and_from_history(client_for, users, trajectory):
    client = client_for("annotator")
    decide(client, trajectory, decision="accept")
    body = client.get("/review/").content.decode()
    review = Review.objects.get()
    assert f'action="/reviews/{review.pk}/undo/' in body and "Undo" in body  # the toast
    client.post(f"/reviews/{review.pk}/undo/")
    trajectory.refresh_from_db()
    review.refresh_from_db()
    assert (
        trajectory.status == TrajectoryStatus.JUDGED_FAIL
        and review.undone_at
        and review.undone_by == users["annotator"]
    )
    assert AuditEvent.objects.filter(action="trajectory.undo", target_id=str(trajectory.pk)).exists()
    # Undoing a fix also reverts its text, as a new version.
    edit(client, trajectory, **{"content-4": "fixed"})
    trajectory.refresh_from_db()
    fix = Review.objects.get(undone_at__isnull=True)
    assert f"/reviews/{fix.pk}/undo/" in client.get(f"/trajectories/{trajectory.pk}/").content.decode()  # history
    response = client.post(f"/reviews/{fix.pk}/undo/")
    assert response["Location"] == f"/trajectories/{trajectory.pk}/?stream=1"  # back in the stream, holding it
    trajectory.refresh_from_db()
    # accept (v2), undo (v3), fix (v4), undo (v5)
    assert trajectory.version == 5 and trajectory.messages[4]["content"] == "Order W1 is cancelled."
    assert trajectory.status == TrajectoryStatus.JUDGED_FAIL and trajectory.reserved_by == users["annotator"]
    client.post(f"/trajectories/{trajectory.pk}/reservation/", {"action": "release"})
    # Someone else's decision is not an annotator's to undo.
    decide(client_for("curator"), trajectory, decision="accept")
    client_for("annotator").post(f"/reviews/{Review.objects.latest('id').pk}/undo/")
    trajectory.refresh_from_db()
    assert trajectory.status == TrajectoryStatus.ACCEPTED


def test_revert_to_an_earlier_version(client_for, trajectory):
    client = client_for("annotator")
    edit(client, trajectory, **{"content-4": "fixed"})
    client.post(f"/trajectories/{trajectory.pk}/revert/", {"to_version": 1, "version": 2})
    trajectory.refresh_from_db()
    assert trajectory.version == 3 and trajectory.messages[4]["content"] == "Order W1 is cancelled."
    assert Revision.objects.filter(object_id=trajectory.pk).count() == 3


def test_empty_trajectories_are_not_reviewable(client_for):
    empty = make_trajectory(judge=verdict(passed=False), messages=[{"role": "system", "content": "You help."}])
    assert not empty.reviewable
    client = client_for("curator")
    assert empty.pk not in {t.pk for t in client.get("/review/").context["page"].rows}
    response = decide(client, empty, decision="accept")
    assert "cannot be accepted" in response.content.decode() or "only be rejected" in response.content.decode()
    assert not Review.objects.exists()
    client.post("/review/bulk/", {"action": "accept", "scope": "selected", "ids": [empty.pk], "query": "status=all"})
    assert not Review.objects.exists()


def test_verdict_shows_its_version_and_goes_stale_after_a_fix(client_for, trajectory):
    client = client_for("annotator")
    assert "On version 1" in client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    edit(client, trajectory, **{"content-4": "fixed"})
    body = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert 'id="verdict-stale"' in body and "the text is now version 2" in body


def test_queue_order_and_filters(client_for):
    passed = make_trajectory(judge=verdict(passed=True, score=0.95, confidence=0.9))
    weak_fail = make_trajectory(judge=verdict(passed=False, score=0.5, confidence=0.4))
    strong_fail = make_trajectory(judge=verdict(passed=False, score=0.2, confidence=0.95))
    rules = make_trajectory(violations=["unknown_tool"])
    low = make_trajectory(judge=verdict(passed=True, score=0.71, confidence=0.6))
    other_domain = make_trajectory("bank", judge=verdict(), messages=None)
    client = client_for("annotator")
    page = client.get("/review/").context["page"]
    assert [t.pk for t in page.rows] == [strong_fail.pk, weak_fail.pk, rules.pk, passed.pk, other_domain.pk, low.pk]

    def ids(**params):
        return {t.pk for t in client.get("/review/", params).context["page"].rows}

    assert ids(verdict="fail") == {strong_fail.pk, weak_fail.pk}
    assert ids(violation="unknown_tool") == {rules.pk}
    assert ids(min_score=0.6, max_score=0.8) == {low.pk}
    assert ids(domain="bank") == {other_domain.pk}
    assert ids(q="cancel order") >= {strong_fail.pk}
    Trajectory.objects.filter(pk=passed.pk).update(status=TrajectoryStatus.REJECTED)
    assert passed.pk not in ids()
    assert passed.pk in ids(status="rejected")
    # A disagreement (judge pass, human reject) sorts before plain items when all statuses are shown.
    order = [t.pk for t in client.get("/review/", {"status": "all"}).context["page"].rows]
    assert order.index(passed.pk) < order.index(low.pk)
    # Sortable columns, both ways.
    by_score = [t.pk for t in client.get("/review/", {"sort": "score"}).context["page"].rows]
    assert by_score[:2] == [strong_fail.pk, weak_fail.pk] and by_score[-1] == rules.pk  # no score: last
    assert [t.pk for t in client.get("/review/", {"sort": "-score"}).context["page"].rows][-1] == rules.pk
    newest = [t.pk for t in client.get("/review/", {"sort": "-date"}).context["page"].rows]
    assert newest == sorted(newest, reverse=True)


def test_queue_pages_by_keyset_numbers_and_the_last_page(client_for):
    made = [make_trajectory(judge=verdict(passed=True, score=0.9, confidence=0.5)) for _ in range(120)]
    expected = [t.pk for t in sorted(made, key=lambda t: -t.pk)]
    client = client_for("annotator")
    first = client.get("/review/").context["page"]
    assert [t.pk for t in first.rows] == expected[:50] and first.num_pages == 3 and first.has_next
    second = client.get("/review/", {"after": first.last_id, "page": 2}).context["page"]
    assert [t.pk for t in second.rows] == expected[50:100]
    back = client.get("/review/", {"before": second.first_id, "page": 1}).context["page"]
    assert [t.pk for t in back.rows] == expected[:50]
    last = client.get("/review/", {"page": 3}).context["page"]
    assert [t.pk for t in last.rows] == expected[100:] and not last.has_next
    jumped = client.get("/review/", {"page": 2}).context["page"]
    assert [t.pk for t in jumped.rows] == expected[50:100]
    body = client.get("/review/", {"page": 2}).content.decode()
    assert 'aria-current="page">2<' in body and "page=3" in body and 'name="page"' in body


def test_text_search_over_messages(client_for):
    target = make_trajectory(messages=None, judge=verdict())
    Trajectory.objects.filter(pk=target.pk).update(messages=[{"role": "user", "content": "refund the zebra lamp"}])
    make_trajectory(judge=verdict())
    page = client_for("annotator").get("/review/", {"q": "Zebra"}).context["page"]
    assert [t.pk for t in page.rows] == [target.pk]


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
    bulk = {"action": "reject", "scope": "all", "query": "verdict=fail", "reason": "bad"}
    confirm = client.post("/review/bulk/", bulk)  # all matching: a confirmation naming the count first
    assert confirm.status_code == 200 and "Reject 3 trajectories?" in confirm.content.decode()
    assert Trajectory.objects.filter(status="rejected").count() == 0
    assert "ask again" not in client.post("/review/bulk/", {**bulk, "confirmed": 2}).content.decode()
    assert Trajectory.objects.filter(status="rejected").count() == 0  # the count changed: asked again
    client.post("/review/bulk/", {**bulk, "confirmed": 3})
    assert set(Trajectory.objects.filter(status="rejected").values_list("pk", flat=True)) == {t.pk for t in fails}
    assert AuditEvent.objects.filter(action="trajectory.status", data__bulk=True).count() == 5
    assert Review.objects.filter(bulk=True).count() == 5


def test_bulk_never_overwrites_an_individual_decision_silently(client_for, users):
    careful = make_trajectory(judge=verdict(passed=False))
    other = make_trajectory(judge=verdict(passed=False))
    annotator = client_for("annotator")
    edit(annotator, careful, **{"content-4": "a careful fix"})
    client = client_for("curator")
    bulk = {"action": "reject", "scope": "all", "query": "status=all", "reason": "batch"}
    body = client.post("/review/bulk/", bulk).content.decode()
    assert "Reject 1 trajectory?" in body and "1</strong> already carries a decision a person made" in body
    response = client.post("/review/bulk/", {**bulk, "confirmed": 1}, follow=True)
    assert "1 left as it was" in response.content.decode()
    careful.refresh_from_db()
    other.refresh_from_db()
    assert careful.status == TrajectoryStatus.ACCEPTED and other.status == TrajectoryStatus.REJECTED


def test_bulk_skips_items_reserved_by_someone_else(client_for, users):
    held, free = make_trajectory(judge=verdict()), make_trajectory(judge=verdict())
    Trajectory.objects.filter(pk=held.pk).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() + timedelta(minutes=5)
    )
    client_for("curator").post("/review/bulk/", {"action": "accept", "scope": "all", "confirmed": 1})
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
    assert [t.pk for t in client.get("/review/", {"mine": "true"}).context["page"].rows] == [a.pk]
    assert b.pk


@pytest.mark.parametrize("n", [5, 60])
def test_queue_queries_are_bounded(client_for, django_assert_max_num_queries, n):
    for i in range(n):
        make_trajectory(judge=verdict(passed=i % 2 == 0), violations=["unknown_tool"] if i % 3 == 0 else ())
    client = client_for("curator")
    with django_assert_max_num_queries(9):
        response = client.get("/review/", {"status": "all", "q": "cancel"})
    assert response.status_code == 200
    with django_assert_max_num_queries(10):
        response = client.get("/review/", {"after": response.context["page"].last_id, "page": 2, "sort": "-turns"})
    assert response.status_code == 200


def test_trajectory_page_queries_are_bounded(client_for, django_assert_max_num_queries):
    t = make_trajectory(judge=verdict(), violations=["unknown_tool", "missing_result"])
    for _ in range(30):
        make_trajectory(judge=verdict())
    client = client_for("annotator")
    with django_assert_max_num_queries(18):
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


def test_search_counts_stop_at_a_limit(db):
    from simia_web.curation.selectors.queue import queue_ordered, queue_page

    for _ in range(4):
        make_trajectory(judge=verdict())
    page = queue_page(queue_ordered(Trajectory.objects.all()), None, count_limit=2)
    assert (page.count, page.count_capped, len(page.rows)) == (2, True, 4)
