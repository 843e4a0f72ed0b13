"""Fidelity pages: the runs, and one run with its figures per API and per trajectory and its examples (the
simulated response beside the reference's answer), everything shown escaped."""

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, render

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.catalog.references import ReferenceConfig
from simia_web.catalog.selectors import domain_named
from simia_web.core.display import pretty_json
from simia_web.core.rest import query_length_check

from . import selectors
from .compare import METHOD_STATEMENT
from .models import Outcome

PAGE_SIZE = 50


@role_required("annotator")
def run_list(request):
    query_length_check(request.GET)
    workspace_ids = page_workspace_ids(request.user)
    name = request.GET.get("domain", "").strip()
    domain = domain_named(name=name, workspace_ids=workspace_ids) if name else None
    runs = selectors.run_list(workspace_ids=workspace_ids, domain_name=name)
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "fidelity/run_list.html", {"page": page, "domain": domain, "query": ""})


@role_required("annotator")
def run_detail(request, pk: int):
    run = get_object_or_404(selectors.run_detail(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    query_length_check(request.GET)
    api = request.GET.get("api", "").strip()
    outcome = request.GET.get("outcome", "")
    outcome = outcome if outcome in Outcome.values else None
    examples = [
        {
            "call": call,
            "simulated": pretty_json(call.simulated),
            "reference": pretty_json(call.reference),
            "arguments": pretty_json(call.arguments),
        }
        for call in selectors.run_examples(run, api=api, outcome=outcome)
    ]
    trajectories = Paginator(selectors.run_trajectories(run), PAGE_SIZE).get_page(request.GET.get("page"))
    summary = run.summary or {}
    return render(
        request,
        "fidelity/run_detail.html",
        {
            "run": run,
            "reference": ReferenceConfig(**run.reference).describe(),
            "method": METHOD_STATEMENT,
            "summary": summary,
            "apis": sorted((summary.get("apis") or {}).items()),
            "outcomes": Outcome.choices,
            "examples": examples,
            "api": api,
            "outcome": outcome or "",
            "page": trajectories,
            "query": "",
        },
    )
