"""Catalog pages: domains, APIs, tasks and seeds (list, view, edit with history) and the queue forms."""

from functools import partial

from django.contrib import messages
from django.core.exceptions import PermissionDenied, ValidationError
from django.core.paginator import Paginator
from django.db.models import Count, IntegerField, OuterRef, Q, Subquery
from django.db.models.functions import Coalesce
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render

from simia_web.accounts.permissions import role_required
from simia_web.core.clipping import clipped, message_page, shown_in_full, too_large_to_edit
from simia_web.core.display import json_diff, pretty_json
from simia_web.core.filters import query_text
from simia_web.core.selectors import revision_list
from simia_web.core.services import VersionConflict
from simia_web.jobs.pipelines import queueable_pipelines
from simia_web.jobs.services import job_queue

from . import services
from .forms import ApiEditForm, DomainEditForm, SeedEditForm, TaskEditForm
from .importers import FORMATS, ImportRejected, seeds_import
from .models import Api, Domain, DomainReference, Seed, Task, TaskStatus
from .selectors import with_domain_named

PAGE_SIZE = 50
HISTORY_LIMIT = 20


def _page(request, qs):
    query = request.GET.copy()
    query.pop("page", None)
    return Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page")), query.urlencode()


def _count(model, **match):
    """A correlated COUNT, so several counts on one row do not multiply each other."""
    rows = model.objects.filter(**match).order_by().values(*match.keys()).annotate(n=Count("id")).values("n")
    return Coalesce(Subquery(rows, output_field=IntegerField()), 0)


def _history(obj) -> list[dict]:
    """Recent revisions, newest first, each with its line diff against the one before."""
    revisions = list(revision_list(obj=obj).order_by("-version")[: HISTORY_LIMIT + 1])
    history = []
    for i, revision in enumerate(revisions[:HISTORY_LIMIT]):
        previous = revisions[i + 1] if i + 1 < len(revisions) else None
        history.append({"revision": revision, "diff": json_diff(previous.data, revision.data) if previous else []})
    return history


def _domain_filter(request, qs):
    domain = query_text(request.GET, "domain")
    if domain:
        qs = qs.filter(domain__name=domain)
    return qs, domain


# ---------------------------------------------------------------- domains


@role_required("annotator")
def domain_list(request):
    qs = Domain.objects.annotate(
        n_apis=_count(Api, domain=OuterRef("pk"), valid=True),
        n_tasks=_count(Task, domain=OuterRef("pk"), status=TaskStatus.VALID),
        n_seeds=_count(Seed, domain=OuterRef("pk")),
    ).order_by("name")
    q = query_text(request.GET, "q")
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(description__icontains=q))
    page, query = _page(request, qs)
    return render(request, "catalog/domain_list.html", {"page": page, "query": query, "q": q})


# ---------------------------------------------------------------- lists


@role_required("annotator")
def api_list(request):
    qs, domain = _domain_filter(request, with_domain_named(Api.objects.defer("parameters", "returns")))
    valid = request.GET.get("valid", "")
    if valid in ("yes", "no"):
        qs = qs.filter(valid=valid == "yes")
    q = query_text(request.GET, "q")
    if q:
        qs = qs.filter(Q(name__icontains=q) | Q(description__icontains=q))
    page, query = _page(request, qs.order_by("domain__name", "name", "id"))
    return render(
        request,
        "catalog/api_list.html",
        {"page": page, "query": query, "q": q, "domain": domain, "valid": valid, "domains": _domain_names()},
    )


@role_required("annotator")
def task_list(request):
    qs, domain = _domain_filter(request, with_domain_named(Task.objects.all()))
    status = request.GET.get("status", "")
    if status in TaskStatus.values:
        qs = qs.filter(status=status)
    q = query_text(request.GET, "q")
    if q:
        qs = qs.filter(instruction__icontains=q)
    page, query = _page(request, qs.order_by("domain__name", "id"))
    return render(
        request,
        "catalog/task_list.html",
        {
            "page": page,
            "query": query,
            "q": q,
            "domain": domain,
            "status": status,
            "statuses": TaskStatus.choices,
            "domains": _domain_names(),
        },
    )


@role_required("annotator")
def seed_list(request):
    qs, domain = _domain_filter(request, with_domain_named(Seed.objects.defer("messages", "tools")))
    usable = request.GET.get("usable", "")
    if usable in ("yes", "no"):
        qs = qs.filter(usable=usable == "yes")
    page, query = _page(request, qs.order_by("domain__name", "id"))
    return render(
        request,
        "catalog/seed_list.html",
        {"page": page, "query": query, "domain": domain, "usable": usable, "domains": _domain_names()},
    )


def _add_errors(form, exc: ValidationError) -> None:
    """Show a service's ValidationError on the form: per field when it names one, else at the top."""
    if not hasattr(exc, "error_dict"):
        form.add_error(None, exc.messages)
        return
    for name, errors in exc.message_dict.items():
        form.add_error(
            name if name in form.fields else None,
            [f"{name}: {e}" for e in errors] if name not in form.fields else errors,
        )


def _domain_names() -> list[str]:
    return list(Domain.objects.order_by("name").values_list("name", flat=True)[:500])


# ---------------------------------------------------------------- view and edit


def _edit(request, *, obj, form_class, update, template: str, context: dict):
    """Shared GET/POST handling: the service validates, a stale version is refused and nothing is lost.

    The form's fields are the service's keyword arguments (`version` becomes `expected_version`)."""
    can_edit = request.user.has_role("curator")
    conflict = None
    if request.method == "POST":
        if not can_edit:
            raise PermissionDenied("Editing needs the curator role.")
        form = form_class(request.POST)
        if form.is_valid():
            data = dict(form.cleaned_data)
            try:
                update(expected_version=data.pop("version"), actor=request.user, **data)
            except VersionConflict as exc:
                conflict = exc
                obj.refresh_from_db()
            except ValidationError as exc:
                _add_errors(form, exc)
            else:
                messages.success(request, f"Saved version {obj.version}.")
                return redirect(request.path)
    else:
        form = form_class(initial=form_class.initial_for(obj))
    return render(
        request,
        template,
        {
            **context,
            "obj": obj,
            "form": form if can_edit else None,
            "conflict": conflict,
            "history": _history(obj),
        },
        status=409 if conflict else 200,
    )


@role_required("annotator")
def domain_detail(request, name: str):
    domain = get_object_or_404(Domain, name=name)
    return _edit(
        request,
        obj=domain,
        form_class=DomainEditForm,
        update=partial(services.domain_update, domain=domain),
        template="catalog/domain_detail.html",
        context={
            "domain": domain,
            "apis": domain.apis.order_by("-valid", "name")[:200],
            "n_tasks": domain.tasks.count(),
            "n_seeds": domain.seeds.count(),
            "state_schema": pretty_json(domain.state_schema),
            "initial_state": pretty_json(domain.initial_state),
            "reference": DomainReference.objects.filter(domain=domain).first(),
        },
    )


@role_required("annotator")
def api_detail(request, pk: int):
    api = get_object_or_404(Api.objects.select_related("domain"), pk=pk)
    return _edit(
        request,
        obj=api,
        form_class=ApiEditForm,
        update=partial(services.api_update, api=api),
        template="catalog/api_detail.html",
        context={"api": api, "tool_json": pretty_json(api.as_tool())},
    )


@role_required("annotator")
def task_detail(request, pk: int):
    task = get_object_or_404(Task.objects.select_related("domain"), pk=pk)
    return _edit(
        request,
        obj=task,
        form_class=TaskEditForm,
        update=partial(services.task_update, task=task),
        template="catalog/task_detail.html",
        context={"task": task},
    )


@role_required("annotator")
def seed_detail(request, pk: int):
    seed = get_object_or_404(Seed.objects.select_related("domain", "created_by"), pk=pk)
    page = message_page(request, seed.messages)
    full = shown_in_full(request)
    context = {
        "seed": seed,
        "page": page,
        "shown": [_message_shown(m, i, full == i) for i, m in enumerate(page, page.start_index() - 1)],
        "query": "",
    }
    if too_large_to_edit(seed.messages, seed.tools):
        # The edit form and the history's diffs would each carry the whole seed: too large for a page.
        if request.method == "POST":
            raise PermissionDenied("This seed is too large to edit in the browser.")
        return render(request, "catalog/seed_detail.html", {**context, "too_large_to_edit": True})
    return _edit(
        request,
        obj=seed,
        form_class=SeedEditForm,
        update=partial(services.seed_update, seed=seed),
        template="catalog/seed_detail.html",
        context=context,
    )


def _message_shown(message, index: int, full: bool) -> dict:
    """A message as the seed page shows it: long texts and tool arguments cut, unless asked for in full."""
    if not isinstance(message, dict):
        message = {"role": "?", "content": str(message)}
    content = message.get("content")
    text, cut = clipped(content if isinstance(content, str) else pretty_json(content) if content else "", full)
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function") if isinstance(call, dict) else None
        function = function if isinstance(function, dict) else {}
        arguments, cut_call = clipped(str(function.get("arguments", "")), full)
        calls.append({"name": str(function.get("name", "")), "arguments": arguments})
        cut = cut or cut_call
    return {"index": index, "role": str(message.get("role", "")), "text": text, "calls": calls, "clipped": cut}


# ---------------------------------------------------------------- queue jobs


@role_required("curator")
def queue_job(request, kind: str):
    """A kind's queue page: its form parses the page, job_queue checks the parameters and queues the job."""
    pipeline = queueable_pipelines().get(kind)
    if pipeline is None or pipeline.form is None:
        raise Http404(f"no queue page for jobs of kind {kind!r}")
    form = pipeline.form(request.POST or None, initial=request.GET.dict())
    if request.method == "POST" and form.is_valid():
        try:
            job = job_queue(kind=kind, params=form.parameters(), actor=request.user)
        except ValidationError as exc:
            _add_errors(form, exc)
        else:
            messages.success(request, f"Job {job.pk} queued.")
            return redirect("job-detail", pk=job.pk)
    return render(request, "catalog/queue_form.html", {"form": form, "title": f"Queue: {pipeline.label}"})


@role_required("curator")
def seed_upload(request):
    """Upload a seed file (drag and drop, or choose) into the same import as `import_seeds`, with its errors."""
    context = {"formats": FORMATS, "chosen": request.POST.get("format", ""), "domain": request.POST.get("domain", "")}
    if request.method == "POST":
        upload = request.FILES.get("file")
        if upload is None or context["chosen"] not in FORMATS:
            context["form_error"] = "Choose a file and its format."
            return render(request, "catalog/seed_upload.html", context, status=400)
        try:
            result = seeds_import(
                source=upload, format=context["chosen"], domain=context["domain"].strip() or None, actor=request.user
            )
        except ImportRejected as exc:
            context["rejected"] = exc
            return render(request, "catalog/seed_upload.html", context, status=400)
        context["result"] = str(result)
    return render(request, "catalog/seed_upload.html", context)
