"""Job pages: list, detail with progress per stage and what the job made, the LLM call log, cancel and retry, and
the queue page of every kind that takes parameters."""

from collections import defaultdict

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.core.display import pretty_json
from simia_web.core.errors import ApplicationError, ValidationFailed, fields_said
from simia_web.core.forms import form_errors_add
from simia_web.llm.models import LLMCall

from . import selectors
from .forms import job_kind_form
from .kinds import job_kind_choices, job_kind_for, job_kind_for_page
from .models import Job, JobStatus
from .services import JobError, job_cancel, job_queue, job_retry

PAGE_SIZE = 50
CALL_PAGE_SIZE = 25


def progress_rows(job: Job) -> list[dict]:
    """Per stage: counts and how to draw the bar, and the stage's running units that say how far they have got.
    Units that failed or ended in an error are errors: a stage with nothing done is drawn as failed, one with some
    as partly failed, never as done."""
    units: dict[str, list[dict]] = defaultdict(list)
    for unit in selectors.job_units_in_progress(job):
        units[unit["stage"]].append({**unit, "percent": _percent(unit["done"], unit["total"])})
    rows = []
    for stage, counts in selectors.job_progress(job).items():
        finished = counts["done"] + counts["errored"] + counts["failed"] + counts["cancelled"]
        errors = counts["failed"] + counts["errored"]
        state = "failed" if errors and not counts["done"] else "partial" if errors else "ok"
        rows.append({"stage": stage, **counts, "finished": finished, "state": state, "units": units[stage]})
    return rows


def _percent(done: int, total: int) -> int | None:
    """Whole percent, rounded down (100 only when all is done); None without a total."""
    return min(100, 100 * done // total) if total > 0 else None


def _live_context(request, job: Job) -> dict:
    """What the job page shows and keeps up to date while the job runs: status, error, progress, usage (the LLM
    call rows recorded for the job), what it made, and the calls themselves."""
    calls = Paginator(
        LLMCall.objects.filter(job=job).select_related("profile").defer("request", "response").order_by("-id"),
        CALL_PAGE_SIZE,
    ).get_page(request.GET.get("page"))
    return {
        "job": job,
        "poll": job.is_active,
        "progress": progress_rows(job),
        "cause": selectors.job_last_llm_error(job),
        "summary": selectors.job_summary(job),
        "result_template": _result_template(job),
        "page": calls,
        "query": "",
    }


def _result_template(job: Job) -> str | None:
    """The kind's panel of what the job made (none for a kind no longer registered)."""
    try:
        return job_kind_for(job.kind).result_template
    except KeyError:
        return None


@role_required("annotator")
def job_list(request):
    """Jobs filtered as the REST API filters them: a value the API refuses is refused here, and said so."""
    refused = ""
    try:
        jobs = selectors.job_list(filters=request.GET, workspace_ids=page_workspace_ids(request.user))
    except ValidationFailed as exc:
        jobs = Job.objects.none()
        refused = fields_said(exc.errors)
    page = Paginator(jobs, PAGE_SIZE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    context = {
        "page": page,
        "query": query.urlencode(),
        "refused": refused,
        "status": request.GET.get("status", ""),
        "kind": request.GET.get("kind", ""),
        "statuses": JobStatus.choices,
        "kinds": job_kind_choices(),
    }
    return render(request, "jobs/list.html", context, status=400 if refused else 200)


def _job(request, pk: int) -> Job:
    """The job `pk` of the current workspace; another workspace's is not found."""
    return get_object_or_404(selectors.jobs_in(workspace_ids=page_workspace_ids(request.user)), pk=pk)


@role_required("annotator")
def job_detail(request, pk: int):
    job = _job(request, pk)
    return render(request, "jobs/detail.html", {**_live_context(request, job), "params_json": pretty_json(job.params)})


@role_required("annotator")
def job_progress(request, pk: int):
    """The progress block (or, with ?part=head, the job page's live part: status, buttons, error, bars, usage, what
    it made and its LLM calls), polled by htmx every two seconds while the job runs; 286 stops the polling."""
    job = _job(request, pk)
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
    job = _job(request, pk)
    try:
        job_cancel(job=job, actor=request.user)
        messages.success(request, f"Job {pk} cancelled.")
    except JobError as exc:
        messages.error(request, str(exc))
    return redirect("job-detail", pk=pk)


@role_required("curator")
@require_POST
def job_retry_view(request, pk: int):
    job = _job(request, pk)
    try:
        new = job_retry(job=job, actor=request.user)
    except JobError as exc:
        messages.error(request, str(exc))
        return redirect("job-detail", pk=pk)
    messages.success(request, f"Job {new.pk} queued with the parameters of job {pk}.")
    return redirect("job-detail", pk=new.pk)


@role_required("curator")
def job_queue_page(request, slug: str):
    """A kind's queue page: its form parses the page, job_queue checks the parameters and queues the job."""
    job_kind = job_kind_for_page(slug)
    if job_kind is None:
        raise Http404(f"no queue page {slug!r}")
    workspace = request.user.current_workspace
    form = job_kind_form(job_kind)(request.POST or None, initial=request.GET.dict(), workspace=workspace)
    if request.method == "POST" and form.is_valid():
        try:
            job = job_queue(
                kind=job_kind.kind,
                params=form.parameters(),
                actor=request.user,
                workspace=workspace,
            )
        except ValidationFailed as exc:
            form_errors_add(form, exc)
        except ApplicationError as exc:  # a kind's service refused what its serializer let through: said on the form
            field = getattr(exc, "field", None)
            form.add_error(field if field in form.fields else None, exc.detail)
        else:
            messages.success(request, f"Job {job.pk} queued.")
            return redirect("job-detail", pk=job.pk)
    context = {"form": form, "title": f"Queue: {job_kind.label}", "notices": form.notices()}
    return render(request, "jobs/queue_form.html", context, status=400 if form.errors else 200)
