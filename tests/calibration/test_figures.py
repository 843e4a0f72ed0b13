"""Agreement figures on a fixed labelled set, against values computed by hand."""

import pytest

from simia_web.calibration.figures import (
    OVERALL,
    alpha,
    disagreements,
    human_consensus,
    inter_annotator,
    judge_against_people,
)
from simia_web.simulation.judge import CRITERIA


def full(value: float, **overrides) -> dict:
    return {**dict.fromkeys(CRITERIA, value), **overrides}


def test_alpha_of_two_coders_on_three_items_is_four_ninths():
    # Values 0,0 | 1,1 | 1,0: Do = 2/6 (one disagreeing unit, its two ordered pairs), De = 18/30 (three 0s and
    # three 1s, 18 ordered pairs differ): alpha = 1 - (1/3)/(3/5) = 4/9.
    assert alpha([[0, 1, 1], [0, 1, 0]]) == pytest.approx(4 / 9)


def test_alpha_is_undefined_without_a_shared_item_or_without_variation():
    assert alpha([[1, None], [None, 0]]) is None
    assert alpha([[0.5, 0.5], [0.5, 0.5]]) is None
    assert alpha([[1, 0, None], [1, 0, 0.5]]) == pytest.approx(1.0)  # the unit rated once is not pairable


def test_inter_annotator_agreement_per_criterion_counts_only_overlapping_items():
    ratings = [
        (1, 10, full(0.0)),
        (1, 11, full(0.0)),
        (2, 10, full(1.0)),
        (2, 11, full(1.0)),
        (3, 10, full(1.0, task_completed=1.0)),
        (3, 11, full(1.0, task_completed=0.0)),
        (4, 10, full(0.3)),  # one annotator only
    ]
    figures = inter_annotator(ratings)
    assert (figures["annotators"], figures["items"], figures["overlapping_items"]) == (2, 4, 3)
    assert figures["criteria"]["task_completed"] == {"alpha": pytest.approx(4 / 9), "items": 3}
    assert figures["criteria"]["policy_followed"]["alpha"] == pytest.approx(1.0)


# The fixed set: four items; item 2 rated by two people (0.3 and 0.5: mean 0.4).
RATINGS = [
    (1, 10, full(0.9)),
    (2, 10, full(0.3)),
    (2, 11, full(0.5)),
    (3, 10, full(0.5)),
    (4, 11, full(0.0)),
]
# The judge: task_completed 1.0, 0.8, 0.3, 0.2; every other criterion as the people's mean. Verdicts pass, pass,
# fail, fail; item 5 got no answer.
ANSWERS = {
    1: (full(0.9, task_completed=1.0), True),
    2: (full(0.4, task_completed=0.8), True),
    3: (full(0.5, task_completed=0.3), False),
    4: (full(0.0, task_completed=0.2), False),
}


def test_judge_against_people_per_criterion_and_overall():
    consensus = human_consensus(RATINGS)
    assert consensus[2]["task_completed"] == pytest.approx(0.4)
    figures = judge_against_people(ANSWERS, consensus)

    task = figures["task_completed"]
    # Judge pass/fail at 0.7: T T F F; people: T F F F.
    assert task["confusion"] == {"pass_pass": 1, "pass_fail": 1, "fail_pass": 0, "fail_fail": 2}
    assert task["n"] == 4 and task["accuracy"] == pytest.approx(0.75)
    # po = 3/4, pe = (2*1 + 2*3)/16 = 1/2: kappa = (3/4 - 1/2) / (1/2) = 1/2.
    assert task["kappa"] == pytest.approx(0.5)
    assert task["mean_abs_error"] == pytest.approx((0.1 + 0.4 + 0.2 + 0.2) / 4)

    same = figures["tool_use_correct"]
    assert same["accuracy"] == 1.0 and same["kappa"] == pytest.approx(1.0) and same["alpha"] == pytest.approx(1.0)

    # People pass by the judge's rule on their means: 0.9 (pass), 0.4, 0.5, 0.0; the judge passed items 1 and 2.
    assert figures[OVERALL]["confusion"] == {"pass_pass": 1, "pass_fail": 1, "fail_pass": 0, "fail_fail": 2}
    assert figures[OVERALL]["kappa"] == pytest.approx(0.5)


def test_disagreements_name_the_items_and_criteria_on_different_sides():
    found = disagreements(ANSWERS, human_consensus(RATINGS))
    assert found == [
        {"trajectory": 2, "criteria": [{"criterion": "task_completed", "judge": 0.8, "people": pytest.approx(0.4)}]}
    ]
