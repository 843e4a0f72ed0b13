from collections import Counter, defaultdict
from decimal import Decimal
from itertools import chain
from urllib.parse import urlsplit, urlunsplit

from django.conf import settings
from django.db.models import Count, Q, Sum

from simia_web.llm.models import LLMCall

from .models import Job, JobStatus, JobUnit, UnitStatus
from .pipelines import pipeline_for

# A stage's units by how they ended; "done" counts only those that made what they were for, "errored" those that
# ended having stored an error (see ERRORED).
UNIT_COUNTS = ("total", *UnitStatus.values, "errored")
# Trajectories that an LLM or internal failure cut short: stored, but not the data the job was for.
BROKEN_TERMINATIONS = ("llm_error", "internal_error")
# A unit that ended in an error it recorded rather than raised: its result says so (a kind's writer that stores a
# failure, such as a judge verdict whose call failed, puts it under "error"), or the trajectory it stored was cut
# short by an LLM or internal error.
ERRORED = Q(status=UnitStatus.DONE) & (
    Q(result__has_key="error") | Q(trajectory__termination_reason__in=BROKEN_TERMINATIONS)
)
# What to check for each kind of failed LLM call; {url} is the endpoint the call went to.
LLM_ERROR_HINTS = {
    "connection_error": "could not reach {url} — check OPENAI_BASE_URL or the endpoint profile",
    "timeout": "{url} did not answer in time — check the endpoint's load or the profile's timeout",
    "rate_limited": "{url} refused calls for their rate (429) — lower the profile's concurrency",
    "http_401": "{url} refused the API key — check the variable named by the profile's api_key_env",
    "http_403": "{url} refused the API key — check the variable named by the profile's api_key_env",
    "http_404": "{url} does not know the model or the path — check the profile's model and base URL",
}


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
        order = pipeline_for(kind).stages
    except KeyError:  # a kind no longer registered: its stages as they come
        order = ()
    rank = {stage: i for i, stage in enumerate(order)}
    return dict(sorted(stages.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0])))


def job_progress(job: Job) -> dict[str, dict[str, int]]:
    """{stage: {"total", "pending", "done", "failed", "cancelled", "errored"}} in planning order."""
    return jobs_progress([job.pk]).get(job.pk, {})


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
    units = Counter()
    for counts in job_progress(job).values():
        units.update({name: n for name, n in counts.items() if name != "total" and n})
    return {"trajectories": trajectories, "rejection_reasons": reasons, "units": dict(units), **job_usage(job)}


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


def job_failure_cause(job: Job) -> tuple[str, str] | None:
    """The most frequent root cause of what failed in the job (its failed units, the trajectories an error cut
    short, the judge's failed verdicts), with an example and what to check, and how often it happened."""
    from simia_web.curation.models import JudgeVerdict, RuleViolation

    failures = chain(
        JobUnit.objects.filter(job=job, status=UnitStatus.FAILED).values_list("error", flat=True).iterator(),
        _recorded_unit_errors(job).values_list("result__error", flat=True).iterator(),
        RuleViolation.objects.filter(trajectory__job=job, code__in=BROKEN_TERMINATIONS, fixed=False)
        .values_list("detail", flat=True)
        .iterator(),
        JudgeVerdict.objects.filter(trajectory__job=job).exclude(error="").values_list("error", flat=True).iterator(),
    )
    causes = Counter(_cause_of(failure) for failure in failures)
    if not causes:
        return None
    cause, n = causes.most_common(1)[0]
    return _cause_said(job, cause), f"{n} of {causes.total()} failures"


def _recorded_unit_errors(job: Job):
    """Units that ended by storing an error their kind put in the result (e.g. a judge verdict whose call failed)."""
    return JobUnit.objects.filter(job=job, status=UnitStatus.DONE, result__has_key="error")


def job_outcome(job: Job) -> tuple[str, str]:
    """(status, error) of a job whose work ended at `job.stage`.

    Failed when that stage made nothing: every unit failed or ended in an error, or there was nothing to run, or
    every trajectory the job stored ended in an LLM or internal error. Finished with errors when a unit failed or
    ended in an error, or a trajectory ended so or was left unjudged because the judge failed. Else succeeded.
    """
    from simia_web.curation.models import JudgeVerdict, Trajectory

    progress = job_progress(job)
    stage = progress.get(job.stage, dict.fromkeys(UNIT_COUNTS, 0))
    if not stage["done"] and not stage["errored"]:
        ended = (
            f"all {stage['total']} units of its {job.stage} stage failed"
            if stage["total"]
            else f"its {job.stage} stage had nothing to run"
        )
        return JobStatus.FAILED, _with_cause(ended, job)
    trajectories = Trajectory.objects.filter(job=job)
    made = trajectories.count()
    broken = trajectories.filter(termination_reason__in=BROKEN_TERMINATIONS).count()
    if made and broken == made:
        return JobStatus.FAILED, _with_cause(f"all {made} trajectories ended in an LLM or internal error", job)
    if not stage["done"]:
        ended = f"all {stage['total']} units of its {job.stage} stage failed or ended in an error"
        return JobStatus.FAILED, _with_cause(ended, job)
    unjudged = (
        JudgeVerdict.objects.filter(trajectory__job=job, trajectory__judge_passed=None)
        .exclude(error="")
        .values("trajectory")
        .distinct()
        .count()
    )
    total = sum(c["total"] for c in progress.values())
    failed_units = sum(counts["failed"] for counts in progress.values())
    recorded_errors = _recorded_unit_errors(job).count()  # the errored units a broken trajectory does not name
    problems = [
        f"{failed_units} of {total} units failed" if failed_units else "",
        f"{recorded_errors} of {total} units ended in an error" if recorded_errors else "",
        f"{broken} of {made} trajectories ended in an LLM or internal error" if broken else "",
        f"{unjudged} trajectories were left unjudged because the judge failed" if unjudged else "",
    ]
    if not any(problems):
        return JobStatus.SUCCEEDED, ""
    return JobStatus.FINISHED_WITH_ERRORS, _with_cause("; ".join(p for p in problems if p), job)


def _with_cause(what: str, job: Job) -> str:
    """The job's error: its root cause first, then how often and what it did to the job."""
    if cause := job_failure_cause(job):
        detail, frequency = cause
        return f"{detail} ({frequency}; {what})"
    return what
