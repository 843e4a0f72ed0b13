"""Catalog pages: domains, APIs, tasks and seeds (list, view, edit with history) and the seed upload."""

from functools import partial

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.core.clipping import clipped, message_page, shown_in_full, too_large_to_edit
from simia_web.core.display import pretty_json
from simia_web.core.errors import ValidationFailed, VersionConflict
from simia_web.core.forms import form_errors_add
from simia_web.core.selectors import revision_diffs

from . import selectors, services
from .forms import (
    ApiCreateForm,
    ApiEditForm,
    DomainCreateForm,
    DomainEditForm,
    SeedEditForm,
    TaskCreateForm,
    TaskEditForm,
)
from .importers import FORMATS, ImportRejected, seeds_import
from .models import ApiKind, DomainSource, SeedFormat, TaskStatus
from .references import reference_for

PAGE_SIZE = 50
HISTORY_LIMIT = 20
DOMAIN_APIS_SHOWN = 200
# The list pages spelled a boolean filter yes/no before they shared the API's filters (true/false): a link or
# bookmark with the old spelling is sent on to the new one.
OLD_BOOLEAN_SPELLINGS = {"yes": "true", "no": "false"}


def _page(request, qs):
    query = request.GET.copy()
    query.pop("page", None)
    return Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page")), query.urlencode()


def _respelled(request, *names: str):
    """A permanent redirect to this list with the old yes/no spelling of the boolean filters `names` as
    true/false, or None when the query has none."""
    query = request.GET.copy()
    old = [name for name in names if query.get(name) in OLD_BOOLEAN_SPELLINGS]
    if not old:
        return None
    for name in old:
        query[name] = OLD_BOOLEAN_SPELLINGS[query[name]]
    return redirect(f"{request.path}?{query.urlencode()}", permanent=True)


def _list_page(request, template: str, rows, **context):
    """A catalog list: one page of the selector's `rows`, with the query that filtered them for the filter form
    (`filters`) and the pager."""
    page, query = _page(request, rows)
    return render(request, template, {"page": page, "query": query, "filters": request.GET, **context})


# ---------------------------------------------------------------- lists


@role_required("annotator")
def domain_list(request):
    rows = selectors.domain_list(filters=request.GET, workspace_ids=page_workspace_ids(request.user))
    return _list_page(request, "catalog/domain_list.html", rows, sources=DomainSource.choices)


@role_required("annotator")
def api_list(request):
    respelled = _respelled(request, "valid")
    if respelled is not None:
        return respelled
    workspace_ids = page_workspace_ids(request.user)
    rows = selectors.api_list(filters=request.GET, workspace_ids=workspace_ids)
    domains = selectors.domain_names(workspace_ids=workspace_ids)
    return _list_page(request, "catalog/api_list.html", rows, domains=domains, kinds=ApiKind.choices)


@role_required("annotator")
def task_list(request):
    workspace_ids = page_workspace_ids(request.user)
    rows = selectors.task_list(filters=request.GET, workspace_ids=workspace_ids)
    domains = selectors.domain_names(workspace_ids=workspace_ids)
    return _list_page(request, "catalog/task_list.html", rows, domains=domains, statuses=TaskStatus.choices)


@role_required("annotator")
def seed_list(request):
    respelled = _respelled(request, "usable")
    if respelled is not None:
        return respelled
    workspace_ids = page_workspace_ids(request.user)
    rows = selectors.seed_list(filters=request.GET, workspace_ids=workspace_ids)
    domains = selectors.domain_names(workspace_ids=workspace_ids)
    return _list_page(request, "catalog/seed_list.html", rows, domains=domains, formats=SeedFormat.choices)


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
            except ValidationFailed as exc:
                form_errors_add(form, exc)
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
            "history": revision_diffs(obj=obj, limit=HISTORY_LIMIT),
        },
        status=409 if conflict else 200,
    )


@role_required("annotator")
def domain_detail(request, name: str):
    domain = get_object_or_404(selectors.domains_counted(workspace_ids=page_workspace_ids(request.user)), name=name)
    return _edit(
        request,
        obj=domain,
        form_class=DomainEditForm,
        update=partial(services.domain_update, domain=domain),
        template="catalog/domain_detail.html",
        context={
            "domain": domain,
            "apis": selectors.domain_apis(domain=domain, limit=DOMAIN_APIS_SHOWN),
            "state_schema": pretty_json(domain.state_schema),
            "initial_state": pretty_json(domain.initial_state),
            "reference": reference_for(domain),
        },
    )


@role_required("annotator")
def api_detail(request, pk: int):
    api = get_object_or_404(selectors.api_details(workspace_ids=page_workspace_ids(request.user)), pk=pk)
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
    task = get_object_or_404(selectors.task_details(workspace_ids=page_workspace_ids(request.user)), pk=pk)
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
    seed = get_object_or_404(selectors.seed_details(workspace_ids=page_workspace_ids(request.user)), pk=pk)
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
                source=upload,
                format=context["chosen"],
                domain=context["domain"].strip() or None,
                workspace_id=request.user.current_workspace_id,
                actor=request.user,
            )
        except ImportRejected as exc:
            context["rejected"] = exc
            return render(request, "catalog/seed_upload.html", context, status=400)
        context["result"] = str(result)
    return render(request, "catalog/seed_upload.html", context)


# ---------------------------------------------------------------- made by hand


def _create_page(request, *, form, title: str, intro: str, submit: str, **context):
    """A create form's page: 400 when the form holds refusals, so a refused submit is never read as a success."""
    return render(
        request,
        "catalog/create.html",
        {"form": form, "title": title, "intro": intro, "submit": submit, **context},
        status=400 if form.errors else 200,
    )


def _created(request, form, create):
    """What the service made from the form's values, or None when it refused them (its reasons go on the form)."""
    if request.method != "POST" or not form.is_valid():
        return None
    try:
        return create(actor=request.user, **form.cleaned_data)
    except ValidationFailed as exc:
        form_errors_add(form, exc)
        return None


@role_required("curator")
def domain_create(request):
    form = DomainCreateForm(request.POST or None)
    domain = _created(request, form, partial(services.domain_create, workspace_id=request.user.current_workspace_id))
    if domain is not None:
        messages.success(request, f"Domain {domain.name} created: now add its APIs and tasks, or synthesize them.")
        return redirect("domain-detail", name=domain.name)
    return _create_page(
        request,
        form=form,
        title="New domain",
        intro="A domain is the world an agent works in: its APIs, its world state, its tasks and the policy the agent "
        "follows. Create it here, then add APIs by hand, import them, or let a synthesis job write them.",
        submit="Create domain",
    )


def _domain_initial(request) -> dict:
    return {"domain": request.GET.get("domain", "")}


@role_required("curator")
def api_create(request):
    workspace_ids = page_workspace_ids(request.user)
    form = ApiCreateForm(request.POST or None, initial=_domain_initial(request), workspace_ids=workspace_ids)
    no_domain = not selectors.domain_names(workspace_ids=workspace_ids)
    api = _created(request, form, services.api_create)
    if api is not None:
        messages.success(request, f"API {api.name} added to {api.domain.name}.")
        return redirect("domain-detail", name=api.domain.name)
    return _create_page(
        request,
        form=form,
        title="Add an API",
        intro="One tool of a domain: its name, what it does, and the JSON Schema of its arguments. To add many at "
        "once, import them from an OpenAPI document or an MCP server.",
        submit="Add API",
        no_domain=no_domain,
        import_link=True,
    )


@role_required("curator")
def task_create(request):
    workspace_ids = page_workspace_ids(request.user)
    form = TaskCreateForm(request.POST or None, initial=_domain_initial(request), workspace_ids=workspace_ids)
    no_domain = not selectors.domain_names(workspace_ids=workspace_ids)
    task = _created(request, form, services.task_create)
    if task is not None:
        duplicate = f" It is a near-duplicate of task {task.duplicate_of_id}." if task.duplicate_of_id else ""
        messages.success(request, f"Task {task.pk} written.{duplicate}")
        return redirect("task-detail", pk=task.pk)
    return _create_page(
        request,
        form=form,
        title="Write a task",
        intro="A task is what a user asks the agent to do in a domain. Rollout and synthesis jobs roll out the valid "
        "tasks; a task close to one the domain has is kept, flagged as a near-duplicate.",
        submit="Write task",
        no_domain=no_domain,
    )
