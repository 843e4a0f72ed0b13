from collections import defaultdict
from decimal import Decimal

from django.db.models import Count, Min, Sum

from simia_web.llm.models import LLMCall

from .models import Job, JobUnit


def job_progress(job: Job) -> dict[str, dict[str, int]]:
    """{stage: {"total": n, "pending": n, "done": n, "failed": n, "cancelled": n}} in planning order."""
    first_unit = dict(
        JobUnit.objects.filter(job=job).values("stage").annotate(first=Min("id")).values_list("stage", "first")
    )
    rows = sorted(
        JobUnit.objects.filter(job=job).values("stage", "status").annotate(n=Count("id")).order_by(),
        key=lambda row: first_unit[row["stage"]],
    )
    progress: dict[str, dict[str, int]] = defaultdict(
        lambda: {"total": 0, "pending": 0, "done": 0, "failed": 0, "cancelled": 0}
    )
    for row in rows:
        progress[row["stage"]][row["status"]] += row["n"]
        progress[row["stage"]]["total"] += row["n"]
    return dict(progress)


def job_usage(job: Job) -> dict:
    totals = LLMCall.objects.filter(job=job).aggregate(
        calls=Count("id"), tokens_in=Sum("tokens_in"), tokens_out=Sum("tokens_out"), cost=Sum("cost")
    )
    errors = dict(
        LLMCall.objects.filter(job=job).exclude(error_kind="").values_list("error_kind").annotate(n=Count("id"))
    )
    return {
        "llm_calls": totals["calls"] or 0,
        "tokens_in": totals["tokens_in"] or 0,
        "tokens_out": totals["tokens_out"] or 0,
        "cost": float(totals["cost"] or Decimal(0)),
        "llm_errors": errors,
    }


def job_summary(job: Job) -> dict:
    """Counts per trajectory status and per rejection reason, units, tokens and cost."""
    from simia_web.curation.models import RuleViolation, Trajectory

    trajectories = dict(Trajectory.objects.filter(job=job).values_list("status").annotate(n=Count("id")).order_by())
    reasons = dict(
        RuleViolation.objects.filter(trajectory__job=job, fixed=False)
        .values_list("code")
        .annotate(n=Count("trajectory", distinct=True))
        .order_by()
    )
    judge_failed = Trajectory.objects.filter(job=job, judge_passed=False).count()
    if judge_failed:
        reasons["judge_fail"] = judge_failed
    units = dict(JobUnit.objects.filter(job=job).values_list("status").annotate(n=Count("id")).order_by())
    return {"trajectories": trajectories, "rejection_reasons": reasons, "units": units, **job_usage(job)}
