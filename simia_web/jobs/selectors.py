"""Reads of jobs: lists, one job's progress per stage, its outcome and summary, and its LLM calls and costs."""

from collections import Counter, defaultdict
from decimal import Decimal
from itertools import chain
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db.models import Count, Q, QuerySet, Sum
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.core.errors import ValidationFailed
from simia_web.llm.models import LLMCall

from .filters import JobFilter
from .kinds import Shortfalls, job_kind_for
from .models import Job, JobStatus, JobUnit, UnitStatus

# A stage's units by how they ended; "done" counts only those that made what they were for, "errored" those that
# ended having stored an error (see ERRORED).
UNIT_COUNTS = ("total", *UnitStatus.values, "errored")
# A unit that ended in an error it recorded rather than raised: its kind's writer put it in the result under "error"
# (a judge verdict whose call failed, a trajectory an LLM error cut short).
ERRORED = Q(status=UnitStatus.DONE, result__has_key="error")
# What to check for each kind of failed LLM call; {url} is the endpoint the call went to.
LLM_ERROR_HINTS = {
    "connection_error": "could not reach {url} — check OPENAI_BASE_URL or the endpoint profile",
    "timeout": "{url} did not answer in time — check the endpoint's load or the profile's timeout",
    "rate_limited": "{url} refused calls for their rate (429) — lower the profile's concurrency",
    "http_401": "{url} refused the API key — check the variable named by the profile's api_key_env",
    "http_403": "{url} refused the API key — check the variable named by the profile's api_key_env",
    "http_404": "{url} does not know the model or the path — check the profile's model and base URL",
}


def jobs_in(*, workspace_ids: list[int]) -> QuerySet[Job]:
    """The workspaces' jobs, with who queued them."""
    return scoped(Job.objects.select_related("created_by"), workspace_ids)


def job_list(*, filters, workspace_ids: list[int]) -> QuerySet[Job]:
    """The workspaces' jobs, newest first, filtered as the REST API filters them (jobs.filters.JobFilter: one
    meaning per parameter); ValidationFailed naming the parameters it refuses."""
    filterset = JobFilter(data=filters, queryset=jobs_in(workspace_ids=workspace_ids).order_by("-id"))
    if not filterset.is_valid():
        raise ValidationFailed.of(filterset.errors)
    return filterset.qs


def jobs_progress(job_ids: list[int]) -> dict[int, dict[str, dict[str, int]]]:
    """{job id: {stage: {"total", "pending", "done", "failed", "cancelled", "errored"}}}, stages in the order
    their kind runs them, in one query for any number of jobs. An errored unit is not counted as done."""
    rows = JobUnit.objects.filter(job_id__in=job_ids).values_list("job_id", "job__kind", "stage", "status")
    counts = rows.annotate(n=Count("id"), errored=Count("id", filter=ERRORED)).order_by()
    progress: dict[int, dict[str, dict[str, int]]] = defaultdict(dict)
    kinds = {}
    for job_id, kind, stage, status, n, errored in counts:
        stage_counts = progress[job_id].setdefault(stage, dict.fromkeys(UNIT_COUNTS, 0))
        stage_counts[status] += n - errored
        stage_counts["errored"] += errored
        stage_counts["total"] += n
        kinds[job_id] = kind
    return {job_id: _in_stage_order(stages, kinds[job_id]) for job_id, stages in progress.items()}


def _in_stage_order(stages: dict, kind: str) -> dict:
    try:
        order = job_kind_for(kind).stages
    except KeyError:  # a kind no longer registered: its stages as they come
        order = ()
    rank = {stage: i for i, stage in enumerate(order)}
    return dict(sorted(stages.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def job_progress(job: Job) -> dict[str, dict[str, int]]:
    """{stage: {"total", "pending", "done", "failed", "cancelled", "errored"}} in planning order."""
    return jobs_progress([job.pk]).get(job.pk, {})


# The most units in progress a job's page and its API name (a kind running thousands at once shows the first).
UNITS_IN_PROGRESS_SHOWN = 20


def job_units_in_progress(job: Job) -> list[dict]:
    """The units of the job's stage that a live worker runs and that say how far they have got (see
    jobs.leases.unit_progress), in unit order, UNITS_IN_PROGRESS_SHOWN at most, in one query:
    {"unit", "stage", "key", "done", "total", "what", "doing"}."""
    if not job.is_active:
        return []
    running = JobUnit.objects.filter(
        job=job, stage=job.stage, status=UnitStatus.PENDING, lease_until__gt=timezone.now(), progress__has_key="done"
    )
    rows = running.order_by("id").values_list("id", "stage", "key", "progress")[:UNITS_IN_PROGRESS_SHOWN]
    return [
        {
            "unit": unit_id,
            "stage": stage,
            "key": key,
            "done": progress["done"],
            "total": progress.get("total", 0),
            "what": progress.get("what", ""),
            "doing": progress.get("doing", ""),
        }
        for unit_id, stage, key, progress in rows
    ]


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


def units_results_summed(job: Job, names) -> dict[str, int]:
    """{name: its sum over the results of the job's units done}, for the counts a kind's units each return."""
    totals = dict.fromkeys(names, 0)
    for result in JobUnit.objects.filter(job=job, status=UnitStatus.DONE).values_list("result", flat=True):
        for name in names:
            totals[name] += result.get(name, 0)
    return totals


def job_summary(job: Job) -> dict:
    """What the job made, as its kind says (see JobKind.summary), with its units by how they ended, tokens and cost."""
    units: Counter[str] = Counter()
    for counts in job_progress(job).values():
        units.update({name: n for name, n in counts.items() if name != "total" and n})
    try:
        made = job_kind_for(job.kind).summary(job)
    except KeyError:  # a kind no longer registered (its app removed): its jobs still show their units and usage
        made = {}
    return {**made, "units": dict(units), **job_usage(job)}


def _endpoint_shown(profile) -> str:
    """The endpoint a call went to, without credentials or query."""
    if profile is None:
        return "the endpoint"
    url = settings.OPENAI_BASE_URL if profile.follows_environment else profile.base_url
    if not url:
        return "the OpenAI API"
    parts = urlsplit(url)
    host = (parts.hostname or "") + (f":{parts.port}" if parts.port else "")
    return urlunsplit((parts.scheme, host, parts.path, "", ""))


def job_last_llm_error(job: Job) -> dict | None:
    """For a job that failed or finished with errors: its last failed LLM call, the endpoint it went to (without
    credentials) and the variable that holds the endpoint's key, so the page can say what to check."""
    if job.status not in (JobStatus.FAILED, JobStatus.FINISHED_WITH_ERRORS):
        return None
    call = (
        LLMCall.objects.filter(job=job)
        .exclude(error_kind="")
        .select_related("profile")
        .only(
            "error",
            "error_kind",
            "model",
            "stage",
            "profile__name",
            "profile__base_url",
            "profile__api_key_env",
            "profile__follows_environment",
        )
        .order_by("-id")
        .first()
    )
    if call is None:
        return None
    return {
        "error": call.error[:500],
        "kind": call.error_kind,
        "stage": call.stage,
        "model": call.model,
        "profile": call.profile.name if call.profile else "",
        "endpoint": _endpoint_shown(call.profile),
        "key_env": call.profile.api_key_env if call.profile else "OPENAI_API_KEY",
    }


def _cause_of(failure: str) -> str:
    """What a failure is counted as: an LLM call's kind of failure that has a hint, else its message on one
    line, without a unit's traceback (a server's answer may span lines: the reason is often on the second)."""
    message = failure.split("\nTraceback (most recent call last):", 1)[0]
    line = " ".join(message.split()).removeprefix("LLMError: ")[:300] or "no error recorded"
    return next((kind for kind in LLM_ERROR_HINTS if f"{kind}:" in line), line)


def _cause_said(job: Job, cause: str) -> str:
    """A cause as the job's error says it: an LLM call's kind of failure with what to check, and where."""
    if cause not in LLM_ERROR_HINTS:
        return cause
    example = LLMCall.objects.filter(job=job, error_kind=cause).select_related("profile").order_by("-id").first()
    return f"{cause}: {LLM_ERROR_HINTS[cause].format(url=_endpoint_shown(example.profile if example else None))}"


def job_failure_cause(job: Job, shortfalls: Shortfalls | None = None) -> tuple[str, str] | None:
    """The most frequent root cause of what failed in the job (its failed units, the errors its units stored, the
    failures its kind names, such as a judge's failed calls), with what to check, and how often it happened."""
    if shortfalls is None:
        shortfalls = job_kind_for(job.kind).outcome(job)
    failures = chain(
        JobUnit.objects.filter(job=job, status=UnitStatus.FAILED).values_list("error", flat=True).iterator(),
        _recorded_unit_errors(job).values_list("result__error", flat=True).iterator(),
        shortfalls.failures,
    )
    causes = Counter(_cause_of(failure) for failure in failures)
    if not causes:
        return None
    cause, n = causes.most_common(1)[0]
    return _cause_said(job, cause), f"{n} of {causes.total()} failures"


def _recorded_unit_errors(job: Job):
    """Units that ended by storing an error their kind put in the result (e.g. a judge verdict whose call failed)."""
    return JobUnit.objects.filter(job=job).filter(ERRORED)


def job_outcome(job: Job) -> tuple[str, str]:
    """(status, error) of a job whose work ended at `job.stage`.

    Failed when that stage made nothing: every unit failed or ended in an error, or there was nothing to run.
    Finished with errors when a unit failed or ended in an error, or the kind finds that what the job made falls
    short (see JobKind.outcome). Else succeeded.
    """
    progress = job_progress(job)
    shortfalls = job_kind_for(job.kind).outcome(job)
    stage = progress.get(job.stage, dict.fromkeys(UNIT_COUNTS, 0))
    if not stage["done"]:
        how = "failed or ended in an error" if stage["errored"] else "failed"
        ended = f"all {stage['total']} units of its {job.stage} stage {how}"
        if not stage["total"]:
            ended = f"its {job.stage} stage had nothing to run"
        return JobStatus.FAILED, _with_cause(ended, job, shortfalls)
    total = sum(counts["total"] for counts in progress.values())
    failed_units = sum(counts["failed"] for counts in progress.values())
    errored_units = sum(counts["errored"] for counts in progress.values())
    problems = [
        *([f"{failed_units} of {total} units failed"] if failed_units else []),
        *([f"{errored_units} of {total} units ended in an error"] if errored_units else []),
        *shortfalls.problems,
    ]
    if not problems:
        return JobStatus.SUCCEEDED, ""
    return JobStatus.FINISHED_WITH_ERRORS, _with_cause("; ".join(problems), job, shortfalls)


def _with_cause(what: str, job: Job, shortfalls: Shortfalls) -> str:
    """The job's error: its root cause first, then how often and what it did to the job."""
    if cause := job_failure_cause(job, shortfalls):
        detail, frequency = cause
        return f"{detail} ({frequency}; {what})"
    return what
