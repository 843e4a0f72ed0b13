"""Every decision stays true to the text it was made on: one test per way the review loop lost or overwrote work
(a revert that kept "accepted", a hold dropped by the editor, a fix saved over someone's accept, fixes that skipped
the strict conversation check, an undo that left the stream, a failed judge call erasing a verdict, drafts,
bulk undo), each walked through the pages as an annotator does."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import review_decide, verdict_record
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import export_write
from simia_web.formats import FormatError
from tests.curation.test_review import HTMX, decide, edit, editor_post
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db


def _exported(tmp_path) -> list[dict]:
    path = tmp_path / "accepted.jsonl"
    export_write(format="openai", filters=export_filters_clean({}), path=path)  # accepted ones
    return [json.loads(line) for line in path.read_text().splitlines()]


def _fixed(t, text: str) -> list[dict]:
    messages = [dict(m) for m in t.messages]
    messages[4] = {"role": "assistant", "content": text}
    return messages


# ---------------------------------------------------------------- 1. a revert makes a decided item undecided


def test_a_revert_of_an_accepted_fix_makes_it_undecided_and_keeps_the_decision_as_history(
    client_for, users, trajectory, tmp_path
):
    curator = client_for("curator")
    edit(curator, trajectory, **{"content-4": "Fixed by the curator."})
    trajectory.refresh_from_db()
    assert (trajectory.version, trajectory.status) == (2, TrajectoryStatus.ACCEPTED)
    assert [r["messages"][4]["content"] for r in _exported(tmp_path)] == ["Fixed by the curator."]

    response = client_for("annotator").post(
        f"/trajectories/{trajectory.pk}/revert/", {"to_version": 1, "version": 2}, follow=True
    )
    assert "undecided again" in response.content.decode()
    trajectory.refresh_from_db()
    assert trajectory.version == 3 and trajectory.messages[4]["content"] == "Order W1 is cancelled."
    assert trajectory.status == TrajectoryStatus.JUDGED_FAIL  # back in the queue
    fix = Review.objects.get(trajectory=trajectory)
    assert fix.superseded_at and fix.superseded_by == users["annotator"] and not fix.undone_at
    assert _exported(tmp_path) == []  # v3's text was accepted by nobody: it does not leave
    body = client_for("annotator").get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "superseded: the item changed after it" in body
    assert trajectory.pk in {t.pk for t in client_for("annotator").get("/review/").context["page"].rows}


def test_a_revert_respects_someone_elses_hold(client_for, users, trajectory):
    edit(client_for("curator"), trajectory, **{"content-4": "Fixed."})
    Trajectory.objects.filter(pk=trajectory.pk).update(
        reserved_by=users["curator"], reserved_until=timezone.now() + timedelta(minutes=2)
    )
    response = client_for("annotator").post(
        f"/trajectories/{trajectory.pk}/revert/", {"to_version": 1, "version": 2}, follow=True
    )
    assert "curator is reviewing trajectory" in response.content.decode()
    trajectory.refresh_from_db()
    assert (trajectory.version, trajectory.status) == (2, TrajectoryStatus.ACCEPTED)


# ---------------------------------------------------------------- 2. the editor keeps the hold


def test_entering_the_editor_keeps_the_hold_in_the_stream(client, users, trajectory):
    second = make_trajectory(judge=verdict(passed=False, score=0.4, confidence=0.5))
    client.force_login(users["annotator"])
    assert client.post("/review/next/")["Location"] == f"/trajectories/{trajectory.pk}/?stream=1"
    # The page being left for the editor: the browser used to send the stream page's release here.
    client.post(f"/trajectories/{trajectory.pk}/reservation/", {"action": "release"})
    assert client.get(f"/trajectories/{trajectory.pk}/edit/?stream=1").status_code == 200
    trajectory.refresh_from_db()
    assert trajectory.reserved_by == users["annotator"]

    # A second annotator's "Start reviewing" passes over it, and cannot decide it.
    client.force_login(users["curator"])
    assert client.post("/review/next/")["Location"] == f"/trajectories/{second.pk}/?stream=1"
    response = decide(client, trajectory, decision="accept")
    assert response.status_code == 409 and not Review.objects.exists()

    # The first annotator's fix saves, and the stream moves on to the next free item.
    client.force_login(users["annotator"])
    response = client.post(
        f"/trajectories/{trajectory.pk}/edit/?stream=1", editor_post(trajectory, **{"content-4": "Mine."})
    )
    assert response.status_code == 302
    trajectory.refresh_from_db()
    assert trajectory.status == TrajectoryStatus.ACCEPTED and trajectory.reserved_by is None


def test_the_editor_renews_the_hold_it_took(client_for, users, trajectory):
    client = client_for("annotator")
    client.get(f"/trajectories/{trajectory.pk}/edit/")
    renewal = client.post(f"/trajectories/{trajectory.pk}/reservation/", {"action": "renew"}).json()
    assert renewal["held"] is True
    body = client_for("curator").get(f"/trajectories/{trajectory.pk}/edit/").content.decode()
    assert 'id="editor-held"' in body and 'id="save-fix" name="then" value="accept" disabled' in body


# ---------------------------------------------------------------- 3. an accept moves what a later writer compares to


def test_a_fix_started_before_someone_elses_accept_is_refused_naming_the_accept(client_for, users, trajectory):
    form = editor_post(trajectory, **{"content-4": "My fix, started on version 1."})
    decide(client_for("curator"), trajectory, decision="accept")
    response = client_for("annotator").post(f"/trajectories/{trajectory.pk}/edit/", form)
    body = response.content.decode()
    assert response.status_code == 409 and 'id="conflict"' in body
    assert "v2: accepted by <strong>curator</strong>" in body
    assert ">My fix, started on version 1.</textarea>" in body  # nothing typed is lost
    trajectory.refresh_from_db()
    assert trajectory.messages[4]["content"] == "Order W1 is cancelled."
    assert [r.decision for r in Review.objects.all()] == ["accept"]


def test_a_decision_on_a_stale_page_names_what_changed(client_for, users, trajectory):
    edit(client_for("curator"), trajectory, **{"content-4": "Curated."})
    response = client_for("annotator").post(
        f"/trajectories/{trajectory.pk}/decide/", {"version": 1, "decision": "reject", "reason": "no"}, **HTMX
    )
    body = response.content.decode()
    assert response.status_code == 409 and "v2: fixed and accepted by <strong>curator</strong>" in body


# ---------------------------------------------------------------- 4. one gate for conversations


BROKEN = {
    "messages[2].tool_calls[0].function.name": lambda m: m[2]["tool_calls"][0]["function"].update(name=""),
    "messages[2].tool_calls[0].function.arguments": lambda m: m[2]["tool_calls"][0]["function"].update(arguments="{"),
    "messages[3].tool_call_id": lambda m: m[3].pop("tool_call_id"),
}


@pytest.mark.parametrize("field", BROKEN)
def test_fix_and_accept_goes_through_the_strict_normaliser(users, trajectory, field):
    messages = json.loads(json.dumps(trajectory.messages))
    BROKEN[field](messages)
    with pytest.raises(FormatError) as refused:
        review_decide(
            trajectory=trajectory,
            reviewer=users["annotator"],
            decision="fix_accept",
            expected_version=1,
            messages=messages,
        )
    assert refused.value.field == field
    trajectory.refresh_from_db()
    assert trajectory.version == 1 and trajectory.status == TrajectoryStatus.JUDGED_FAIL
    assert not Review.objects.exists()


def test_the_editor_shows_the_gates_refusal_beside_the_field(client_for, trajectory):
    response = edit(client_for("annotator"), trajectory, **{"tool_call_id-3": ""})
    body = response.content.decode()
    assert response.status_code == 200 and 'data-for="tool_call_id-3">is missing' in body
    trajectory.refresh_from_db()
    assert trajectory.version == 1 and not Review.objects.exists()


# ---------------------------------------------------------------- 5. undo keeps the annotator in the stream


def test_undo_returns_to_the_stream_at_that_item_holding_it(client_for, users, trajectory):
    second = make_trajectory(judge=verdict(passed=False, score=0.4, confidence=0.5))
    client = client_for("annotator")
    client.post("/review/next/")
    response = client.post(f"/trajectories/{trajectory.pk}/decide/?stream=1", {"version": 1, "decision": "accept"})
    assert response["Location"] == f"/trajectories/{second.pk}/?stream=1"
    review = Review.objects.get()
    response = client.post(f"/reviews/{review.pk}/undo/")
    assert response["Location"] == f"/trajectories/{trajectory.pk}/?stream=1"
    trajectory.refresh_from_db()
    second.refresh_from_db()
    assert trajectory.reserved_by == users["annotator"] and second.reserved_by is None
    assert 'id="stream-bar"' in client.get(response["Location"]).content.decode()
    # Deciding it again in the stream carries on from there.
    response = client.post(f"/trajectories/{trajectory.pk}/decide/?stream=1", {"version": 3, "decision": "accept"})
    assert response["Location"] == f"/trajectories/{second.pk}/?stream=1"


def test_a_decision_outside_the_stream_never_jumps_to_an_item_someone_else_holds(client_for, users):
    held = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    viewed = make_trajectory(judge=verdict(passed=False, confidence=0.5))
    free = make_trajectory(judge=verdict(passed=True))
    Trajectory.objects.filter(pk=held.pk).update(
        reserved_by=users["curator"], reserved_until=timezone.now() + timedelta(minutes=2)
    )
    client = client_for("annotator")
    response = decide(client, viewed, decision="accept")
    assert response["HX-Redirect"] == f"/trajectories/{free.pk}/"
    # On the held item the buttons are off and say why (the `a` key shows that reason too).
    body = client.get(f"/trajectories/{held.pk}/").content.decode()
    assert 'id="disabled-reason"' in body and 'id="accept-btn" disabled' in body


def test_start_reviewing_from_here_holds_the_item_being_viewed(client_for, users):
    head = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    viewed = make_trajectory(judge=verdict(passed=True))
    response = client_for("annotator").post("/review/next/", {"here": viewed.pk})
    assert response["Location"] == f"/trajectories/{viewed.pk}/?stream=1"
    assert Trajectory.objects.get(pk=viewed.pk).reserved_by == users["annotator"]
    assert Trajectory.objects.get(pk=head.pk).reserved_by is None


# ---------------------------------------------------------------- 6. a failed judge call never erases a verdict


def test_a_failed_judge_call_is_shown_beside_the_verdict_it_does_not_replace(client_for, trajectory):
    failed = {"passed": None, "scores": {}, "score": None, "confidence": None, "error": "connection_error: no server"}
    verdict_record(trajectory_id=trajectory.pk, version=1, verdict=failed)
    trajectory.refresh_from_db()
    assert (trajectory.judge_passed, trajectory.judge_score, trajectory.judge_confidence) == (False, 0.3, 0.9)
    assert trajectory.status == TrajectoryStatus.JUDGED_FAIL
    client = client_for("annotator")
    assert trajectory.pk in {t.pk for t in client.get("/review/", {"verdict": "fail"}).context["page"].rows}
    body = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert "Judging v1 failed" in body and "the verdict above stands" in body and "connection_error" in body
    assert "score 0.30" in body


# ---------------------------------------------------------------- 7. drafts


def test_the_editor_keeps_a_draft_per_person_and_restores_it(client_for, users, trajectory):
    client = client_for("annotator")
    form = editor_post(trajectory, **{"content-4": "Half-way through my fix"})
    saved = client.post(f"/trajectories/{trajectory.pk}/draft/", form).json()
    assert saved["saved"] and saved["version"] == 1
    body = client.get(f"/trajectories/{trajectory.pk}/edit/").content.decode()
    assert 'id="draft-restored"' in body and ">Half-way through my fix</textarea>" in body
    assert 'id="draft-stale"' not in body
    assert "unsaved draft of this item" in client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    # Someone else's editor shows the text as it is.
    assert ">Half-way through" not in client_for("curator").get(f"/trajectories/{trajectory.pk}/edit/").content.decode()

    # The item moves on (the annotator left the editor): the draft says it is stale, and saving it is refused.
    client_for("annotator").post(f"/trajectories/{trajectory.pk}/reservation/", {"action": "release"})
    decide(client_for("curator"), trajectory, decision="accept")
    client = client_for("annotator")
    body = client.get(f"/trajectories/{trajectory.pk}/edit/").content.decode()
    assert 'id="draft-stale"' in body and "v2: accepted by <strong>curator</strong>" in body
    assert client.post(f"/trajectories/{trajectory.pk}/edit/", form).status_code == 409
    # Discarding it shows the current version; saving a fix removes the draft.
    client.post(f"/trajectories/{trajectory.pk}/draft/", {"action": "discard"})
    body = client.get(f"/trajectories/{trajectory.pk}/edit/").content.decode()
    assert 'id="draft-restored"' not in body and 'name="version" value="2"' in body
    trajectory.refresh_from_db()
    client.post(f"/trajectories/{trajectory.pk}/draft/", editor_post(trajectory, **{"content-4": "again"}))
    edit(client, trajectory, **{"content-4": "Done."})
    assert not trajectory.drafts.exists()


# ---------------------------------------------------------------- 9. bulk undo, plurals


def test_a_bulk_decision_can_be_undone_from_its_notice(client_for, users):
    rows = [make_trajectory(judge=verdict(passed=True)) for _ in range(3)]
    client = client_for("curator")
    response = client.post(
        "/review/bulk/", {"action": "accept", "scope": "selected", "ids": [t.pk for t in rows]}, follow=True
    )
    body = response.content.decode()
    assert 'id="bulk-toast"' in body and "3 trajectories accepted." in body
    assert Trajectory.objects.filter(status=TrajectoryStatus.ACCEPTED).count() == 3
    # One of them is decided again by a person before the undo: the undo leaves it as it is.
    decide(client_for("annotator"), Trajectory.objects.get(pk=rows[0].pk), decision="reject", reason="wrong")
    batch = Review.objects.filter(bulk=True).values_list("batch", flat=True).first()
    response = client_for("curator").post("/review/bulk/undo/", {"batch": str(batch)}, follow=True)
    assert "Undone: 2 trajectories wait for review again. 1 left as it was" in response.content.decode()
    statuses = dict(Trajectory.objects.values_list("pk", "status"))
    assert statuses == {rows[0].pk: "rejected", rows[1].pk: "judged_pass", rows[2].pk: "judged_pass"}


def test_bulk_counts_are_said_in_the_singular_when_there_is_one(client_for, users):
    held, free = make_trajectory(judge=verdict()), make_trajectory(judge=verdict())
    Trajectory.objects.filter(pk=held.pk).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() + timedelta(minutes=5)
    )
    body = client_for("curator").post("/review/bulk/", {"action": "accept", "scope": "all"}).content.decode()
    assert "1</strong> is being reviewed by someone" in body and "are being reviewed" not in body
    assert free.pk


def test_saving_without_deciding_makes_a_decided_item_undecided(client_for, users, trajectory):
    decide(client_for("curator"), trajectory, decision="accept")
    trajectory.refresh_from_db()
    client = client_for("annotator")
    response = client.post(
        f"/trajectories/{trajectory.pk}/edit/",
        {**editor_post(trajectory, **{"content-4": "Reworded."}), "then": "edit"},
    )
    assert response["Location"] == f"/trajectories/{trajectory.pk}/"
    trajectory.refresh_from_db()
    assert (trajectory.version, trajectory.text_version, trajectory.status) == (3, 3, TrajectoryStatus.JUDGED_FAIL)
    assert trajectory.reserved_by is None  # outside the stream the work is done: the hold goes
    accept = Review.objects.get()
    assert accept.superseded_by == users["annotator"] and not accept.standing
