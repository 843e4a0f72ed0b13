"""Ratings per judge criterion bound to the text version they were made on, assignments of items to k annotators,
agreement from ratings on the agreement page, and the role checks of the pages and the API."""

import pytest

from simia_web.accounts.models import Workspace, default_workspace_id
from simia_web.accounts.services import user_create
from simia_web.calibration.models import CriterionRating, MessageLabel, RatingAssignment
from simia_web.calibration.selectors import inbox, inter_annotator_agreement, verdicts_against_people
from simia_web.calibration.services import RatingStale, assignments_create, rating_save
from simia_web.core.errors import ValidationFailed
from simia_web.curation.services import review_decide, trajectory_edit
from simia_web.simulation.judge import CRITERIA
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db


def full(value: float, **overrides) -> dict:
    return {**dict.fromkeys(CRITERIA, value), **overrides}


def test_a_rating_is_bound_to_the_text_version_and_an_edit_makes_it_history(users):
    trajectory = make_trajectory()
    rating = rating_save(
        trajectory_id=trajectory.pk,
        annotator=users["annotator"],
        text_version=1,
        scores=full(0.8, policy_followed=0.2),
        comment="Skipped the confirmation.",
        message_labels={"2": {"error_types": ["policy_violation"], "comment": "No confirmation asked."}},
    )
    assert rating.trajectory_version == 1 and rating.scores["policy_followed"] == 0.2
    label = MessageLabel.objects.get(rating=rating)
    assert (label.message_index, label.error_types, label.comment) == (
        2,
        ["policy_violation"],
        "No confirmation asked.",
    )

    # Saving again replaces the annotator's rating of that version.
    rating_save(trajectory_id=trajectory.pk, annotator=users["annotator"], text_version=1, scores=full(0.5))
    assert CriterionRating.objects.get().scores == full(0.5) and not MessageLabel.objects.exists()

    # A decision does not change the text: the rating stands.
    review_decide(trajectory=trajectory, reviewer=users["curator"], decision="accept", expected_version=1)
    assert inter_annotator_agreement(workspace_ids=[default_workspace_id()])["items"] == 1

    trajectory.refresh_from_db()
    edited = [dict(m) for m in trajectory.messages]
    edited[-1]["content"] = "Order W1 is now cancelled."
    trajectory_edit(
        trajectory=trajectory, editor=users["curator"], messages=edited, expected_version=trajectory.version
    )
    trajectory.refresh_from_db()
    assert trajectory.text_version > 1
    # Only ratings of the current text count.
    assert inter_annotator_agreement(workspace_ids=[default_workspace_id()])["items"] == 0
    with pytest.raises(RatingStale):
        rating_save(trajectory_id=trajectory.pk, annotator=users["annotator"], text_version=1, scores=full(1.0))
    rating_save(
        trajectory_id=trajectory.pk, annotator=users["annotator"], text_version=trajectory.text_version, scores=full(1)
    )
    assert list(
        CriterionRating.objects.order_by("trajectory_version").values_list("trajectory_version", flat=True)
    ) == [
        1,
        trajectory.text_version,
    ]


@pytest.mark.parametrize(
    "scores, labels",
    [
        ({"task_completed": 0.75}, {}),  # off the judge's grid of tenths
        ({"task_completed": 1.5}, {}),
        ({"made_up": 0.5}, {}),
        ({}, {}),
        ({"task_completed": 0.5}, {"99": {"comment": "no such message"}}),
        ({"task_completed": 0.5}, {"1": {"error_types": ["typo"]}}),
    ],
)
def test_ratings_off_the_judges_scale_or_labels_off_the_taxonomy_are_refused(users, scores, labels):
    trajectory = make_trajectory()
    with pytest.raises(ValidationFailed):
        rating_save(
            trajectory_id=trajectory.pk,
            annotator=users["annotator"],
            text_version=1,
            scores=scores,
            message_labels=labels,
        )
    assert not CriterionRating.objects.exists()


def test_items_go_to_k_annotators_with_the_load_kept_even(users):
    people = [user_create(username=f"rater{i}", role="annotator", password="correct-horse-9") for i in range(3)]
    items = [make_trajectory().pk for _ in range(3)]
    where = {"actor": users["curator"], "selection": {}, "workspace": Workspace.objects.get(slug="default")}
    made = assignments_create(trajectory_ids=items, annotators=people, overlap=2, **where)
    assert made == {"batch": made["batch"], "items": 3, "assignments": 6, "gold": 0}
    per_item = {item: set() for item in items}
    for item, person in RatingAssignment.objects.values_list("trajectory_id", "annotator_id"):
        per_item[item].add(person)
    assert all(len(holders) == 2 for holders in per_item.values())
    loads = [RatingAssignment.objects.filter(annotator=p).count() for p in people]
    assert sorted(loads) == [2, 2, 2]

    # Again with k=3: each item only gets the annotator it lacks.
    again = assignments_create(trajectory_ids=items, annotators=people, overlap=3, **where)
    assert again["assignments"] == 3 and RatingAssignment.objects.count() == 9
    with pytest.raises(ValidationFailed):
        assignments_create(trajectory_ids=items, annotators=people, overlap=4, **where)

    rating_save(trajectory_id=items[0], annotator=people[0], text_version=1, scores=full(0.5))
    assert [(a.trajectory_id, a.done) for a in inbox(people[0], workspace_ids=[default_workspace_id()])] == [
        (items[1], False),
        (items[2], False),
        (items[0], True),
    ]


def test_ratings_show_in_agreement_per_criterion_and_between_annotators(users, client_for):
    a, b = users["annotator"], users["curator"]
    first = make_trajectory(judge=verdict(passed=True, scores=full(1.0)))
    second = make_trajectory(judge=verdict(passed=False, scores=full(0.0)))
    third = make_trajectory(judge=verdict(passed=True, scores=full(1.0)))
    # task_completed by a/b: 0,0 | 1,1 | 1,0 (alpha 4/9); every other criterion the same for both people.
    for t, mine, theirs in [(first, 0.0, 0.0), (second, 1.0, 1.0), (third, 1.0, 0.0)]:
        rating_save(trajectory_id=t.pk, annotator=a, text_version=1, scores=full(1.0, task_completed=mine))
        rating_save(trajectory_id=t.pk, annotator=b, text_version=1, scores=full(1.0, task_completed=theirs))

    iaa = inter_annotator_agreement(workspace_ids=[default_workspace_id()])
    assert iaa["criteria"]["task_completed"]["alpha"] == pytest.approx(4 / 9)
    # The judge's task_completed: pass, fail, pass; people's means 0, 1, 0.5 (pass at 0.7): fail, pass, fail.
    figures = verdicts_against_people(workspace_ids=[default_workspace_id()])
    assert figures["task_completed"]["confusion"] == {"pass_pass": 0, "pass_fail": 2, "fail_pass": 1, "fail_fail": 0}
    assert figures["task_completed"]["accuracy"] == 0.0

    page = client_for("annotator").get("/agreement/").content.decode()
    assert 'hx-get="/calibration/agreement/"' in page
    panel = client_for("annotator").get("/calibration/agreement/").content.decode()
    assert "0.444" in panel and "task_completed" in panel


def test_the_rating_panel_saves_over_htmx_and_refuses_a_stale_text(users, client_for):
    trajectory = make_trajectory()
    client = client_for("annotator")
    page = client.get(f"/trajectories/{trajectory.pk}/").content.decode()
    assert f'hx-get="/trajectories/{trajectory.pk}/rating/"' in page
    panel = client.get(f"/trajectories/{trajectory.pk}/rating/").content.decode()
    assert 'for="score-task_completed"' in panel and 'name="csrfmiddlewaretoken"' in panel

    form = {
        "text_version": "1",
        "score-task_completed": "0.6",
        "score-policy_followed": "0.2",
        "comment": "<b>bold</b>",
        "label-0-index": "2",
        "label-0-types": ["wrong_tool", "bad_arguments"],
        "label-0-comment": "Wrong call.",
    }
    saved = client.post(f"/trajectories/{trajectory.pk}/rating/", form, HTTP_HX_REQUEST="true")
    assert saved.status_code == 200 and 'id="rating-saved"' in saved.content.decode()
    assert "&lt;b&gt;bold&lt;/b&gt;" in saved.content.decode()
    rating = CriterionRating.objects.get()
    assert rating.scores == {"task_completed": 0.6, "policy_followed": 0.2}
    assert rating.message_labels.get().error_types == ["bad_arguments", "wrong_tool"]

    garbage = client.post(f"/trajectories/{trajectory.pk}/rating/", {**form, "score-task_completed": "lots"})
    assert garbage.status_code == 400 and 'id="rating-error"' in garbage.content.decode()

    stale = client.post(f"/trajectories/{trajectory.pk}/rating/", {**form, "text_version": "0"})
    assert stale.status_code == 409 and 'id="rating-error"' in stale.content.decode()


def test_roles_of_the_calibration_pages_and_the_api(users, client_for, client):
    trajectory = make_trajectory()
    assert client.get("/calibration/").status_code == 302  # to the login page
    annotator = client_for("annotator")
    assert annotator.get("/calibration/").status_code == 200
    assert annotator.get("/calibration/assigned/").status_code == 200
    assert annotator.get("/calibration/assignments/").status_code == 403
    refused = annotator.post(
        "/api/v1/rating-assignments/",
        {"trajectories": [trajectory.pk], "annotators": ["annotator"], "overlap": 1},
        content_type="application/json",
    )
    assert refused.status_code == 403

    curator = client_for("curator")
    assert curator.get("/calibration/assignments/").status_code == 200
    made = curator.post(
        "/calibration/assignments/",
        {"ids": str(trajectory.pk), "overlap": "1", "limit": "10", "annotators": ["annotator"]},
    )
    assert made.status_code == 302 and RatingAssignment.objects.get().annotator == users["annotator"]

    api = client_for("annotator")
    body = {"trajectory": trajectory.pk, "text_version": 1, "scores": {"task_completed": 0.9}}
    created = api.post(
        "/api/v1/ratings/",
        {**body, "messages": [{"message_index": 1, "comment": "ok"}]},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    assert created.json()["annotator"] == "annotator" and created.json()["messages"][0]["comment"] == "ok"
    stale = api.post("/api/v1/ratings/", {**body, "text_version": 2}, content_type="application/json")
    assert stale.status_code == 409 and stale.json()["text_version"] == 1
    mine = api.get("/api/v1/rating-assignments/").json()
    assert [row["trajectory"] for row in mine["results"]] == [trajectory.pk]
