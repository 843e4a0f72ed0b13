"""Judge verdicts against people's decisions on the trajectories of the workspaces given: the 2x2 matrix, Cohen's
kappa, per-criterion scores and agreement over time, from the rollups of the workspaces' domains."""

from collections.abc import Iterable
from datetime import date, timedelta

from django.db.models import Sum

from simia_web.catalog.models import Domain
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


def agreement(
    *, workspace_ids: Iterable[int] | None = None, domain=None, job=None, profile=None, criteria: bool = True
) -> dict:
    """Judge verdict vs the latest individual human decision over reviewed items of the workspaces `workspace_ids`
    (of a domain id, job id and the latest verdict's endpoint profile id), from the rollups. Without workspaces, a
    `domain` is needed: its own workspace's figures (a snapshot's card).

    Bulk decisions are not judgements of single items: they are counted apart (`bulk`), never as agreement.
    """
    if workspace_ids is None:
        if domain is None:
            raise TypeError("agreement() reads the figures of workspace_ids, or of one domain.")
        workspace_ids = _workspace_of_domain(domain)
    workspace_ids = list(workspace_ids)
    where = {"workspace_ids": workspace_ids, "domain": domain, "job": job}
    cells = dict.fromkeys(CELLS, 0)
    cells.update(rollup_counts(rollup_rows(Figure.AGREEMENT, profile=profile, **where), "label"))
    matrix = {CELLS[name]: n for name, n in cells.items() if n}
    total = sum(matrix.values())
    agreed = cells["pass_accept"] + cells["fail_reject"]
    bulk = rollup_rows(Figure.BULK_ONLY, **where).aggregate(n=Sum("n"))["n"] or 0
    return {
        "matrix": matrix,
        "cells": cells,
        "total": total,
        "bulk": bulk,
        "agreement": agreed / total if total else None,
        "kappa": cohen_kappa(matrix),
        "criteria": criterion_breakdown(profile=profile, **where) if criteria and total else [],
    }


def _workspace_of_domain(domain: int) -> list[int]:
    return list(Domain.objects.filter(pk=domain).values_list("workspace_id", flat=True))


def criterion_breakdown(*, workspace_ids: Iterable[int], domain=None, job=None, profile=None) -> list[dict]:
    """Mean judge score per criterion for human-accepted vs human-rejected items (latest verdicts) of the
    workspaces."""
    sums: dict[str, dict[str, tuple[float, int]]] = {}
    for side in (Figure.CRITERION_ACCEPTED, Figure.CRITERION_REJECTED):
        where = {"workspace_ids": workspace_ids, "domain": domain, "job": job, "profile": profile}
        rows = rollup_rows(side, **where).values_list("label")
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


def agreement_over_time(
    *, workspace_ids: Iterable[int], domain=None, job=None, profile=None, days: int = 30
) -> dict[str, list]:
    """Daily share of individual decisions on the workspaces' trajectories that agreed with the judge's verdict, by
    the day of the decision."""
    since = rollup_today() - timedelta(days=days - 1)
    where = {"domain": domain, "job": job, "profile": profile, "day__gte": since}
    rows = rollup_rows(Figure.AGREEMENT_DAY, workspace_ids=workspace_ids, **where)
    by_day: dict[date, dict[str, int]] = {}
    for day, label, n in rollup_counts(rows, "day", "label"):
        by_day.setdefault(day, {})[label] = n
    return {
        "agreement": [(day, counts.get("agreed", 0) / sum(counts.values())) for day, counts in sorted(by_day.items())]
    }


def judge_profiles() -> list[EndpointProfile]:
    """The endpoint profiles agreement can be narrowed to (the judge's), by name."""
    return list(EndpointProfile.objects.order_by("name"))
