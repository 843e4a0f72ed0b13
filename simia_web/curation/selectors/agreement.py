"""Judge verdicts against people's decisions: the 2x2 matrix, Cohen's kappa, per-criterion scores and agreement
over time."""

from collections import defaultdict
from datetime import timedelta

from django.db.models import CharField, Count, Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import TruncDate
from django.utils import timezone

from simia_web.curation.models import STANDING, Decision, JudgeVerdict, Review, Trajectory
from simia_web.llm.models import EndpointProfile


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


def individual_reviews() -> QuerySet[Review]:
    """Decisions a person made one item at a time that still stand: the only ones agreement counts."""
    return Review.objects.filter(STANDING, bulk=False)


def _reviewed(domain=None, job=None, profile=None) -> QuerySet[Trajectory]:
    latest_review = individual_reviews().filter(trajectory=OuterRef("pk")).order_by("-id")
    latest_verdict = JudgeVerdict.objects.filter(trajectory=OuterRef("pk"), error="").order_by("-id")
    qs = Trajectory.objects.filter(judge_passed__isnull=False).annotate(
        human=Subquery(latest_review.values("decision")[:1], output_field=CharField()),
        verdict_id=Subquery(latest_verdict.values("id")[:1]),
        verdict_profile=Subquery(latest_verdict.values("profile_id")[:1]),
    )
    qs = qs.filter(human__isnull=False)
    if domain:
        qs = qs.filter(domain_id=domain)
    if job:
        qs = qs.filter(job_id=job)
    if profile:
        qs = qs.filter(verdict_profile=profile)
    return qs


def agreement(*, domain=None, job=None, profile=None, criteria: bool = True) -> dict:
    """Judge verdict vs the latest individual human decision over reviewed items, in three queries.

    Bulk decisions are not judgements of single items: they are counted apart (`bulk`), never as agreement.
    """
    reviewed = _reviewed(domain, job, profile)
    only_bulk = Trajectory.objects.filter(
        Exists(Review.objects.filter(STANDING, trajectory=OuterRef("pk"), bulk=True)),
        ~Exists(individual_reviews().filter(trajectory=OuterRef("pk"))),
    )
    if domain:
        only_bulk = only_bulk.filter(domain_id=domain)
    if job:
        only_bulk = only_bulk.filter(job_id=job)
    matrix: dict[tuple[bool, bool], int] = {}
    # `human` and `verdict_id` are _reviewed()'s annotations, which its return type does not carry.
    pairs = reviewed.values_list("judge_passed", "human")  # type: ignore[misc]
    for judge_passed, human, n in pairs.annotate(n=Count("id")).order_by():
        key = (bool(judge_passed), human != Decision.REJECT)
        matrix[key] = matrix.get(key, 0) + n
    total = sum(matrix.values())
    agreed = matrix.get((True, True), 0) + matrix.get((False, False), 0)
    result = {
        "matrix": matrix,
        "cells": {
            "pass_accept": matrix.get((True, True), 0),
            "pass_reject": matrix.get((True, False), 0),
            "fail_accept": matrix.get((False, True), 0),
            "fail_reject": matrix.get((False, False), 0),
        },
        "total": total,
        "bulk": only_bulk.count(),
        "agreement": agreed / total if total else None,
        "kappa": cohen_kappa(matrix),
        "criteria": [],
    }
    if criteria and total:
        result["criteria"] = criterion_breakdown(reviewed)
    return result


def criterion_breakdown(reviewed: QuerySet[Trajectory]) -> list[dict]:
    """Mean judge score per criterion for human-accepted vs human-rejected items (latest verdicts)."""
    sums: defaultdict[str, dict[str, list[float]]] = defaultdict(lambda: {"accept": [0.0, 0], "reject": [0.0, 0]})
    verdict_ids = reviewed.values("verdict_id")  # type: ignore[misc]  # an annotation of _reviewed()
    rows = JudgeVerdict.objects.filter(pk__in=verdict_ids).annotate(
        human=Subquery(
            individual_reviews().filter(trajectory=OuterRef("trajectory_id")).order_by("-id").values("decision")[:1]
        )
    )
    for scores, human in rows.values_list("scores", "human").iterator(chunk_size=2000):
        side = "reject" if human == Decision.REJECT else "accept"
        for name, value in (scores or {}).items():
            if isinstance(value, dict):
                value = value.get("score")
            if isinstance(value, int | float) and not isinstance(value, bool):
                sums[name][side][0] += value
                sums[name][side][1] += 1
    table = []
    for name in sorted(sums):
        acc, rej = sums[name]["accept"], sums[name]["reject"]
        mean_acc = acc[0] / acc[1] if acc[1] else None
        mean_rej = rej[0] / rej[1] if rej[1] else None
        gap = mean_acc - mean_rej if mean_acc is not None and mean_rej is not None else None
        table.append(
            {"name": name, "accepted": mean_acc, "rejected": mean_rej, "n_acc": acc[1], "n_rej": rej[1], "gap": gap}
        )
    return table


def agreement_over_time(*, domain=None, job=None, profile=None, days: int = 30) -> dict[str, list]:
    """Daily share of individual decisions that agreed with the judge's verdict, by the day of the decision."""
    since = timezone.now() - timedelta(days=days)
    reviews = individual_reviews().filter(created_at__gte=since, trajectory__judge_passed__isnull=False)
    if domain:
        reviews = reviews.filter(trajectory__domain_id=domain)
    if job:
        reviews = reviews.filter(trajectory__job_id=job)
    if profile:
        reviews = reviews.filter(trajectory__verdicts__profile_id=profile)
    agreed = Q(trajectory__judge_passed=True) & ~Q(decision=Decision.REJECT) | Q(
        trajectory__judge_passed=False, decision=Decision.REJECT
    )
    rows = (
        reviews.annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"), agreed=Count("id", filter=agreed))
        .order_by("day")
    )
    return {"agreement": [(row["day"], row["agreed"] / row["n"]) for row in rows]}


def judge_profiles() -> list[EndpointProfile]:
    """The endpoint profiles agreement can be narrowed to (the judge's), by name."""
    return list(EndpointProfile.objects.order_by("name"))
