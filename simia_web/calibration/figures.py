"""Agreement figures on ratings, with no database: between annotators (Krippendorff's alpha per criterion) and
between the judge and the people (accuracy, Cohen's kappa and a confusion matrix per criterion, pass or fail at the
judge's own threshold, and Krippendorff's alpha on the scores themselves).

Scores are on the judge's scale (0 to 1 in tenths), so alpha is taken at the interval level of measurement. Where
several people rated an item, the human side is their mean per criterion."""

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import krippendorff
import numpy as np

from simia_web.curation.selectors.agreement import cohen_kappa
from simia_web.simulation.judge import CRITERIA, PASS_THRESHOLD

OVERALL = "passed"  # the row of the verdict as a whole, beside the criteria


def alpha(reliability: list[list[float | None]]) -> float | None:
    """Krippendorff's alpha (interval) of a coders x units table (None: not rated); None when undefined, as when
    no unit has two values or every value is the same."""
    if not reliability or not reliability[0]:
        return None
    table = np.array([[np.nan if v is None else float(v) for v in row] for row in reliability], dtype=float)
    pairable = (~np.isnan(table)).sum(axis=0) >= 2
    values = table[:, pairable]
    if not pairable.any() or np.unique(values[~np.isnan(values)]).size < 2:
        return None
    value = krippendorff.alpha(reliability_data=values, level_of_measurement="interval")
    return None if math.isnan(value) else float(value)


def inter_annotator(ratings: Iterable[tuple[int, int, Mapping[str, float]]]) -> dict:
    """Per criterion: Krippendorff's alpha between annotators and the items it rests on (rated by two or more).

    `ratings` are (item, annotator, scores) with one row per annotator and item."""
    by_item: dict[int, dict[int, Mapping[str, float]]] = defaultdict(dict)
    for item, annotator, scores in ratings:
        by_item[item][annotator] = scores
    items = sorted(by_item)
    annotators = sorted({a for rated in by_item.values() for a in rated})
    shared = [item for item in items if len(by_item[item]) >= 2]
    result: dict[str, Any] = {
        "annotators": len(annotators),
        "items": len(items),
        "overlapping_items": len(shared),
        "criteria": {},
    }
    for criterion in CRITERIA:
        table = [[by_item[item].get(a, {}).get(criterion) for item in shared] for a in annotators]
        result["criteria"][criterion] = {"alpha": alpha(table), "items": len(shared)}
    return result


def human_consensus(ratings: Iterable[tuple[int, int, Mapping[str, float]]]) -> dict[int, dict[str, float]]:
    """Per item, each criterion's mean over the people who rated it."""
    sums: dict[int, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for item, _annotator, scores in ratings:
        for criterion in CRITERIA:
            if isinstance(scores.get(criterion), int | float):
                sums[item][criterion].append(float(scores[criterion]))
    return {item: {c: sum(v) / len(v) for c, v in per.items()} for item, per in sums.items()}


def passes(scores: Mapping[str, float]) -> bool | None:
    """Pass by the judge's rule on the criteria's mean (the judge's own flag aside); None without every criterion."""
    if any(not isinstance(scores.get(c), int | float) for c in CRITERIA):
        return None
    return sum(scores[c] for c in CRITERIA) / len(CRITERIA) >= PASS_THRESHOLD


def _binary(pairs: list[tuple[bool, bool]]) -> dict:
    matrix: dict[tuple[bool, bool], int] = defaultdict(int)
    for judge, human in pairs:
        matrix[(judge, human)] += 1
    n = len(pairs)
    return {
        "n": n,
        "accuracy": (matrix[(True, True)] + matrix[(False, False)]) / n if n else None,
        "kappa": cohen_kappa(dict(matrix)),
        # Rows: the judge; columns: the people.
        "confusion": {
            "pass_pass": matrix[(True, True)],
            "pass_fail": matrix[(True, False)],
            "fail_pass": matrix[(False, True)],
            "fail_fail": matrix[(False, False)],
        },
    }


def judge_against_people(
    answers: Mapping[int, tuple[Mapping[str, float], bool | None]], consensus: Mapping[int, Mapping[str, float]]
) -> dict:
    """The judge's answers ({item: (scores, passed)}) against the people's consensus, per criterion and overall.

    A criterion's pass is a score at or above the judge's threshold; overall, the judge's verdict against the
    people's ratings passed by the judge's rule (see passes). Items the judge gave no answer on are left out."""
    figures = {}
    for criterion in CRITERIA:
        scored = [
            (answer[0][criterion], consensus[item][criterion])
            for item, answer in answers.items()
            if item in consensus and criterion in consensus[item] and isinstance(answer[0].get(criterion), int | float)
        ]
        row = _binary([(judge >= PASS_THRESHOLD, human >= PASS_THRESHOLD) for judge, human in scored])
        row["alpha"] = alpha([[judge for judge, _ in scored], [human for _, human in scored]])
        row["mean_abs_error"] = sum(abs(j - h) for j, h in scored) / len(scored) if scored else None
        figures[criterion] = row
    verdicts = [
        (bool(answer[1]), human)
        for item, answer in answers.items()
        if answer[1] is not None and (human := passes(consensus.get(item, {}))) is not None
    ]
    figures[OVERALL] = _binary(verdicts)
    return figures


def disagreements(
    answers: Mapping[int, tuple[Mapping[str, float], bool | None]], consensus: Mapping[int, Mapping[str, float]]
) -> list[dict]:
    """The items where the judge and the people fall on different sides of the threshold, most criteria first."""
    found: list[dict[str, Any]] = []
    for item, (scores, _passed) in answers.items():
        human = consensus.get(item, {})
        split = [
            {"criterion": c, "judge": scores[c], "people": human[c]}
            for c in CRITERIA
            if isinstance(scores.get(c), int | float)
            and c in human
            and (scores[c] >= PASS_THRESHOLD) != (human[c] >= PASS_THRESHOLD)
        ]
        if split:
            found.append({"trajectory": item, "criteria": split})
    found.sort(key=lambda row: (-len(row["criteria"]), row["trajectory"]))
    return found
