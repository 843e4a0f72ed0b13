"""The dashboard's figures: trajectories by status, review progress and verdicts by domain, decisions per
annotator and day, and the judge's score histogram."""

from collections import defaultdict
from datetime import timedelta

from django.db.models import Count, F, QuerySet, Value
from django.db.models.functions import Floor, Least, TruncDate
from django.utils import timezone

from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.jobs.models import ACTIVE_JOB_STATUSES, Job


def status_counts() -> dict[str, int]:
    counts = dict(Trajectory.objects.values_list("status").annotate(n=Count("id")).order_by())
    return {value: counts.get(value, 0) for value in TrajectoryStatus.values}


def review_progress_by_domain() -> dict[str, dict[str, int]]:
    """{domain: {status: count}} for the review progress bars."""
    progress: dict[str, dict[str, int]] = defaultdict(dict)
    for name, status, n in Trajectory.objects.values_list("domain__name", "status").annotate(n=Count("id")).order_by():
        progress[name][status] = n
    return dict(sorted(progress.items()))


def _slice(domain: str | None = None, job: int | None = None) -> QuerySet[Trajectory]:
    qs = Trajectory.objects.all()
    if domain:
        qs = qs.filter(domain__name=domain)
    if job:
        qs = qs.filter(job_id=job)
    return qs


def verdicts_by_domain(*, job: int | None = None) -> dict[str, dict[str, int]]:
    """{domain: {"pass" | "fail" | "none": count}} of the latest judge verdicts (of one job)."""
    by_domain: dict[str, dict[str, int]] = defaultdict(dict)
    rows = _slice(job=job).values_list("domain__name", "judge_passed").annotate(n=Count("id")).order_by()
    for name, passed, n in rows:
        by_domain[name][{True: "pass", False: "fail", None: "none"}[passed]] = n
    return dict(sorted(by_domain.items()))


def throughput_per_annotator(days: int = 14) -> dict[str, list]:
    """{reviewer: [(day, decisions)]} over the last `days` days, individual and bulk decisions alike."""
    since = timezone.now() - timedelta(days=days)
    series = defaultdict(list)
    rows = (
        Review.objects.filter(created_at__gte=since, undone_at__isnull=True)
        .annotate(day=TruncDate("created_at"))
        .values_list("reviewer__username", "day")
        .annotate(n=Count("id"))
        .order_by("reviewer__username", "day")
    )
    for username, day, n in rows:
        series[username].append((day, n))
    return dict(series)


def score_histogram(*, domain: str | None = None, job: int | None = None, bins: int = 10) -> list[tuple]:
    """[(low, high, count)] of judge scores in [0, 1] (of one domain and/or job)."""
    counts = dict(
        _slice(domain, job)
        .filter(judge_score__isnull=False)
        .annotate(bin=Least(Floor(F("judge_score") * bins), Value(float(bins - 1))))
        .values_list("bin")
        .annotate(n=Count("id"))
        .order_by()
    )
    return [(i / bins, (i + 1) / bins, counts.get(i, 0)) for i in range(bins)]


def jobs_running_and_recent(*, running: int = 10, recent: int = 5) -> tuple[list[Job], list[Job]]:
    """The newest jobs still running, and the newest that ended."""
    jobs = Job.objects.order_by("-id")
    return (
        list(jobs.filter(status__in=ACTIVE_JOB_STATUSES)[:running]),
        list(jobs.exclude(status__in=ACTIVE_JOB_STATUSES)[:recent]),
    )
