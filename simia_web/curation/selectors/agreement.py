"""Judge verdicts against people's decisions: the 2x2 matrix, Cohen's kappa, per-criterion scores and agreement
over time."""

from datetime import date, timedelta

from django.db.models import Sum

from simia_web.curation.models import Figure
from simia_web.curation.selectors.rollups import rollup_counts, rollup_rows, rollup_today
from simia_web.llm.models import EndpointProfile

CELLS = {
    "pass_accept": (True, True),
    "pass_reject": (True, False),
    "fail_accept": (False, True),
    "fail_reject": (False, False),
}


def cohen_kappa(matrix: dict[tuple[bool, bool], int]) -> float | None:
    """Cohen's kappa for a 2x2 matrix keyed by (judge passed, human accepted); None when undefined."""
    a = matrix.get((True, True), 0)
    b = matrix.get((True, False), 0)
    c = matrix.get((False, True), 0)
    d = matrix.get((False, False), 0)
    n = a + b + c + d
    if not n:
        return None
    observed = (a + d) / n
    expected = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
    if expected == 1:
        return 1.0 if observed == 1 else None
    return (observed - expected) / (1 - expected)


def agreement(*, domain=None, job=None, profile=None, criteria: bool = True) -> dict:
    """Judge verdict vs the latest individual human decision over reviewed items (of a domain id, job id and the
    latest verdict's endpoint profile id), from the rollups.

    Bulk decisions are not judgements of single items: they are counted apart (`bulk`), never as agreement.
    """
    cells = dict.fromkeys(CELLS, 0)
    cells.update(rollup_counts(rollup_rows(Figure.AGREEMENT, domain=domain, job=job, profile=profile), "label"))
    matrix = {CELLS[name]: n for name, n in cells.items() if n}
    total = sum(matrix.values())
    agreed = cells["pass_accept"] + cells["fail_reject"]
    bulk = rollup_rows(Figure.BULK_ONLY, domain=domain, job=job).aggregate(n=Sum("n"))["n"] or 0
    return {
        "matrix": matrix,
        "cells": cells,
        "total": total,
        "bulk": bulk,
        "agreement": agreed / total if total else None,
        "kappa": cohen_kappa(matrix),
        "criteria": criterion_breakdown(domain=domain, job=job, profile=profile) if criteria and total else [],
    }


def criterion_breakdown(*, domain=None, job=None, profile=None) -> list[dict]:
    """Mean judge score per criterion for human-accepted vs human-rejected items (latest verdicts)."""
    sums: dict[str, dict[str, tuple[float, int]]] = {}
    for side in (Figure.CRITERION_ACCEPTED, Figure.CRITERION_REJECTED):
        rows = rollup_rows(side, domain=domain, job=job, profile=profile).values_list("label")
        for name, n, total in rows.annotate(n=Sum("n"), total=Sum("total")).order_by():
            sums.setdefault(name, {})[side] = (total, n)
    table = []
    for name in sorted(sums):
        acc_total, n_acc = sums[name].get(Figure.CRITERION_ACCEPTED, (0.0, 0))
        rej_total, n_rej = sums[name].get(Figure.CRITERION_REJECTED, (0.0, 0))
        mean_acc = acc_total / n_acc if n_acc else None
        mean_rej = rej_total / n_rej if n_rej else None
        gap = mean_acc - mean_rej if mean_acc is not None and mean_rej is not None else None
        table.append(
            {"name": name, "accepted": mean_acc, "rejected": mean_rej, "n_acc": n_acc, "n_rej": n_rej, "gap": gap}
        )
    return table


def agreement_over_time(*, domain=None, job=None, profile=None, days: int = 30) -> dict[str, list]:
    """Daily share of individual decisions that agreed with the judge's verdict, by the day of the decision."""
    since = rollup_today() - timedelta(days=days - 1)
    rows = rollup_rows(Figure.AGREEMENT_DAY, domain=domain, job=job, profile=profile, day__gte=since)
    by_day: dict[date, dict[str, int]] = {}
    for day, label, n in rollup_counts(rows, "day", "label"):
        by_day.setdefault(day, {})[label] = n
    return {
        "agreement": [(day, counts.get("agreed", 0) / sum(counts.values())) for day, counts in sorted(by_day.items())]
    }


def judge_profiles() -> list[EndpointProfile]:
    """The endpoint profiles agreement can be narrowed to (the judge's), by name."""
    return list(EndpointProfile.objects.order_by("name"))
