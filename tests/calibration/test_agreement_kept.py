"""Agreement figures are computed once per state of the ratings and kept: a second load reads them in a few queries,
and a rating, a changed text or a new verdict shows on the very next load."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.accounts.models import default_workspace_id
from simia_web.calibration import figures
from simia_web.calibration.models import KeptFigures
from simia_web.calibration.selectors import inter_annotator_agreement, verdicts_against_people
from simia_web.calibration.services import rating_save
from simia_web.curation.services import trajectory_edit, verdict_record
from simia_web.simulation.judge import CRITERIA
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db


def default() -> list[int]:
    """The `default` workspace, where the factories put every item: the figures read here are its own."""
    return [default_workspace_id()]


# Per item: the judge's score on every criterion, then two people's grades.
ITEMS = [(0.9, 0.9, 0.8), (0.2, 0.2, 0.3), (0.8, 0.5, 0.9)]


def full(value: float) -> dict:
    return dict.fromkeys(CRITERIA, value)


@pytest.fixture
def rated(users) -> list:
    items = []
    for judged, first, second in ITEMS:
        item = make_trajectory(judge=verdict(passed=judged >= 0.7, score=judged, scores=full(judged)))
        rating_save(trajectory_id=item.pk, annotator=users["annotator"], text_version=1, scores=full(first))
        rating_save(trajectory_id=item.pk, annotator=users["curator"], text_version=1, scores=full(second))
        items.append(item)
    return items


@pytest.fixture
def computed(monkeypatch) -> dict[str, int]:
    """How many times each figure is computed."""
    calls = {"inter_annotator": 0, "judge_against_people": 0}
    for name in calls:
        compute = getattr(figures, name)

        def counted(*args, _name=name, _compute=compute):
            calls[_name] += 1
            return _compute(*args)

        monkeypatch.setattr(figures, name, counted)
    return calls


def computed_afresh() -> tuple[dict, dict]:
    KeptFigures.objects.all().delete()
    return inter_annotator_agreement(workspace_ids=default()), verdicts_against_people(workspace_ids=default())


def test_a_second_load_reads_the_kept_figures_in_a_few_queries(rated, computed, django_assert_max_num_queries):
    workspace_ids = default()
    first = inter_annotator_agreement(workspace_ids=workspace_ids), verdicts_against_people(workspace_ids=workspace_ids)
    with django_assert_max_num_queries(3):  # the fingerprint (two reads) and the kept figures
        assert inter_annotator_agreement(workspace_ids=workspace_ids) == first[0]
    with django_assert_max_num_queries(4):  # and the verdicts on rated items
        assert verdicts_against_people(workspace_ids=workspace_ids) == first[1]
    assert computed == {"inter_annotator": 1, "judge_against_people": 1}
    assert KeptFigures.objects.count() == 2


def test_every_change_the_figures_rest_on_shows_on_the_next_load(rated, users):
    before = inter_annotator_agreement(workspace_ids=default()), verdicts_against_people(workspace_ids=default())

    # A rating changed in place: as many ratings as before, on the same texts.
    rating_save(trajectory_id=rated[2].pk, annotator=users["curator"], text_version=1, scores=full(0.5))
    changed = inter_annotator_agreement(workspace_ids=default()), verdicts_against_people(workspace_ids=default())
    assert changed != before and changed == computed_afresh()
    alphas = [state[0]["criteria"]["task_completed"]["alpha"] for state in (before, changed)]
    assert alphas[1] > alphas[0]  # the people now agree on the third item

    # A new verdict on a rated item's current text.
    verdict_record(trajectory_id=rated[0].pk, version=1, verdict=verdict(passed=False, score=0.1, scores=full(0.1)))
    judged = verdicts_against_people(workspace_ids=default())
    assert judged != changed[1] and judged == computed_afresh()[1]

    # A changed text: its ratings become history.
    rated[1].refresh_from_db()
    edited = [dict(m) for m in rated[1].messages]
    edited[-1]["content"] = "Order W1 is now cancelled."
    trajectory_edit(trajectory=rated[1], editor=users["curator"], messages=edited, expected_version=rated[1].version)
    after_edit = inter_annotator_agreement(workspace_ids=default()), verdicts_against_people(workspace_ids=default())
    assert after_edit[0]["overlapping_items"] == 2 and after_edit == computed_afresh()
    assert KeptFigures.objects.count() == 2  # figures of an older state are not kept


def test_the_agreement_panel_computes_the_figures_once_and_shows_a_new_rating_at_once(
    rated, users, computed, client_for
):
    annotator = client_for("annotator")
    with CaptureQueriesContext(connection) as first:
        assert annotator.get("/calibration/agreement/").status_code == 200
    with CaptureQueriesContext(connection) as again:
        page = annotator.get("/calibration/agreement/").content.decode()
    assert computed == {"inter_annotator": 1, "judge_against_people": 1}
    # The session and the role, the ratings' fingerprint (two reads, once for both figures), the verdicts on rated
    # items and each kept figure.
    assert len(again) < len(first) and len(again) <= 7, [q["sql"] for q in again]
    assert "over the 3 items that two or more of the 2 annotators rated" in page

    third = make_trajectory()
    annotator.post(f"/trajectories/{third.pk}/rating/", {"text_version": 1, "score-task_completed": 0.4})
    rating_save(trajectory_id=third.pk, annotator=users["curator"], text_version=1, scores={"task_completed": 0.6})
    page = annotator.get("/calibration/agreement/").content.decode()
    assert "over the 4 items that two or more of the 2 annotators rated" in page
