"""Job pages: list, detail with progress per stage, the LLM call log, cancel and retry."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.core.display import pretty_json
from simia_web.exports.models import Snapshot
from simia_web.llm.models import LLMCall

from . import selectors
from .models import Job, JobStatus
from .pipelines import job_kind_choices, pipeline_for
from .services import JobError, job_cancel, job_retry

PAGE_SIZE = 50
CALL_PAGE_SIZE = 25


def progress_rows(job: Job) -> list[dict]:
    """Per stage: counts and how to draw the bar. Units that failed or ended in an error are errors: a stage with
    nothing done is drawn as failed, one with some as partly failed, never as done."""
    rows = []
    for stage, counts in selectors.job_progress(job).items():
        finished = counts["done"] + counts["errored"] + counts["failed"] + counts["cancelled"]
        errors = counts["failed"] + counts["errored"]
        state = "failed" if errors and not counts["done"] else "partial" if errors else "ok"
        rows.append({"stage": stage, **counts, "finished": finished, "state": state})
    return rows


def _live_context(request, job: Job) -> dict:
    """What the job page shows and keeps up to date while the job runs: status, error, progress, usage (the LLM
    call rows recorded for the job), what it made, and the calls themselves."""
    calls = Paginator(
        LLMCall.objects.filter(job=job).select_related("profile").defer("request", "response").order_by("-id"),
        CALL_PAGE_SIZE,
    ).get_page(request.GET.get("page"))
    summary = selectors.job_summary(job)
    return {
        "job": job,
        "results_url": _results_url(job),
        "poll": job.is_active,
        "progress": progress_rows(job),
        "cause": selectors.job_last_llm_error(job),
        "snapshot": Snapshot.objects.filter(job=job).first(),
        "summary": summary,
        "reasons": sorted(summary["rejection_reasons"].items(), key=lambda kv: -kv[1]),
        "page": calls,
        "query": "",
    }


def _results_url(job: Job) -> str | None:
    """Where a kind shows what a job made, when it has a page of its own for it (a fidelity run's figures)."""
    try:
        pipeline = pipeline_for(job.kind)
    except KeyError:  # a kind no longer registered
        return None
    results_url = getattr(pipeline, "results_url", None)
    return results_url(job) if results_url else None


@role_required("annotator")
def job_list(request):
    qs = Job.objects.select_related("created_by").order_by("-id")
    status, kind = request.GET.get("status", ""), request.GET.get("kind", "")
    if status in JobStatus.values:
        qs = qs.filter(status=status)
    if kind in dict(job_kind_choices()):
        qs = qs.filter(kind=kind)
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "jobs/list.html",
        {
            "page": page,
            "query": query.urlencode(),
            "status": status,
            "kind": kind,
            "statuses": JobStatus.choices,
            "kinds": job_kind_choices(),
        },
    )


@role_required("annotator")
def job_detail(request, pk: int):
    job = get_object_or_404(Job.objects.select_related("created_by"), pk=pk)
    return render(request, "jobs/detail.html", {**_live_context(request, job), "params_json": pretty_json(job.params)})


@role_required("annotator")
def job_progress(request, pk: int):
    """The progress block (or, with ?part=head, the job page's live part: status, buttons, error, bars, usage, what
    it made and its LLM calls), polled by htmx every two seconds while the job runs; 286 stops the polling."""
    job = get_object_or_404(Job.objects.select_related("created_by"), pk=pk)
    if request.GET.get("part") == "head":
        response = render(request, "jobs/_head.html", _live_context(request, job))
    else:
        response = render(
            request, "jobs/_progress.html", {"job": job, "progress": progress_rows(job), "poll": job.is_active}
        )
    if not job.is_active:
        response.status_code = 286
    return response


@role_required("curator")
@require_POST
def job_cancel_view(request, pk: int):
    job = get_object_or_404(Job, pk=pk)
    try:
        job_cancel(job=job, actor=request.user)
        messages.success(request, f"Job {pk} cancelled.")
    except JobError as exc:
        messages.error(request, str(exc))
    return redirect("job-detail", pk=pk)


@role_required("curator")
@require_POST
def job_retry_view(request, pk: int):
    job = get_object_or_404(Job, pk=pk)
    try:
        new = job_retry(job=job, actor=request.user)
    except JobError as exc:
        messages.error(request, str(exc))
        return redirect("job-detail", pk=pk)
    messages.success(request, f"Job {new.pk} queued with the parameters of job {pk}.")
    return redirect("job-detail", pk=new.pk)
