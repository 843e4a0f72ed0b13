"""The dashboard's figures of the workspaces it is given: trajectories by status, review progress and verdicts by
domain, decisions per annotator and day, and the judge's score histogram, read from the rollups of the workspaces'
domains (never by scanning trajectories); the workspaces' jobs."""

from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta

from simia_web.accounts.models import User
from simia_web.accounts.scoping import scoped
from simia_web.curation.models import Figure, TrajectoryStatus
from simia_web.curation.rollups import SCORE_BINS
from simia_web.curation.selectors.rollups import rollup_counts, rollup_rows, rollup_today
from simia_web.jobs.models import ACTIVE_JOB_STATUSES, Job


def status_counts(*, workspace_ids: Iterable[int]) -> dict[str, int]:
    counts = dict(rollup_counts(rollup_rows(Figure.STATUS, workspace_ids=workspace_ids), "label"))
    return {value: counts.get(value, 0) for value in TrajectoryStatus.values}


def review_progress_by_domain(*, workspace_ids: Iterable[int]) -> dict[str, dict[str, int]]:
    """{domain: {status: count}} for the review progress bars."""
    progress: defaultdict[str, dict[str, int]] = defaultdict(dict)
    rows = rollup_rows(Figure.STATUS, workspace_ids=workspace_ids)
    for name, status, n in rollup_counts(rows, "domain__name", "label"):
        progress[name][status] = n
    return dict(sorted(progress.items()))


def verdicts_by_domain(*, workspace_ids: Iterable[int], job: int | None = None) -> dict[str, dict[str, int]]:
    """{domain: {"pass" | "fail" | "none": count}} of the latest judge verdicts (of one job)."""
    by_domain: defaultdict[str, dict[str, int]] = defaultdict(dict)
    rows = rollup_rows(Figure.VERDICT, workspace_ids=workspace_ids, job=job)
    for name, verdict, n in rollup_counts(rows, "domain__name", "label"):
        by_domain[name][verdict] = n
    return dict(sorted(by_domain.items()))


def throughput_per_annotator(*, workspace_ids: Iterable[int], days: int = 14) -> dict[str, list]:
    """{reviewer: [(day, decisions)]} over the last `days` days (today included), individual and bulk decisions
    alike, on the workspaces' trajectories."""
    since = rollup_today() - timedelta(days=days - 1)
    rows = rollup_rows(Figure.DECISIONS, workspace_ids=workspace_ids, day__gte=since)
    counted = list(rollup_counts(rows, "reviewer", "day"))
    names = dict(User.objects.filter(pk__in={reviewer for reviewer, _, _ in counted}).values_list("pk", "username"))
    series = defaultdict(list)
    for reviewer, day, n in sorted(counted, key=lambda row: (names.get(row[0], ""), row[1])):
        series[names.get(reviewer, f"user {reviewer}")].append((day, n))
    return dict(series)


def score_histogram(*, workspace_ids: Iterable[int], domain: str | None = None, job: int | None = None) -> list[tuple]:
    """[(low, high, count)] of judge scores in [0, 1] (of one domain and/or job)."""
    rows = rollup_rows(Figure.SCORE, workspace_ids=workspace_ids, domain__name=domain, job=job)
    counts = {int(b): n for b, n in rollup_counts(rows, "label")}
    return [(i / SCORE_BINS, (i + 1) / SCORE_BINS, counts.get(i, 0)) for i in range(SCORE_BINS)]


def jobs_running_and_recent(
    *, workspace_ids: Iterable[int], running: int = 10, recent: int = 5
) -> tuple[list[Job], list[Job]]:
    """The workspaces' newest jobs still running, and the newest that ended."""
    jobs = scoped(Job.objects.all(), workspace_ids).order_by("-id")
    return (
        list(jobs.filter(status__in=ACTIVE_JOB_STATUSES)[:running]),
        list(jobs.exclude(status__in=ACTIVE_JOB_STATUSES)[:recent]),
    )
