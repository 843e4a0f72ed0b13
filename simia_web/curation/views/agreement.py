"""Judge-versus-human agreement in the current workspace, read from the rollups of its domains."""

from typing import Any

from django.shortcuts import render
from django.urls import reverse

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.curation import charts
from simia_web.curation.forms import (
    AgreementFilterForm,
)
from simia_web.curation.selectors.agreement import agreement, agreement_over_time, judge_profiles

from .common import with_query


@role_required("annotator")
def agreement_page(request):
    workspace_ids = page_workspace_ids(request.user)
    profiles = judge_profiles()
    form = AgreementFilterForm(request.GET or None, workspace_ids=workspace_ids, profiles=profiles)
    data = form.cleaned_data if form.is_valid() else {}
    domain = data["domain"] if data.get("domain") else None
    slice_filters: dict[str, Any] = {
        "workspace_ids": workspace_ids,
        "domain": domain.pk if domain else None,
        "job": data.get("job"),
        "profile": data.get("profile"),
    }
    result = agreement(**slice_filters)
    queue_filters = {}
    if domain:
        queue_filters["domain"] = domain.name
    if data.get("job"):
        queue_filters["job"] = data["job"]
    cell_links = {
        name: with_query(reverse("review-queue"), "", **queue_filters, verdict=verdict, status=status)
        for name, verdict, status in [
            ("pass_accept", "pass", "accepted"),
            ("pass_reject", "pass", "rejected"),
            ("fail_accept", "fail", "accepted"),
            ("fail_reject", "fail", "rejected"),
        ]
    }
    over_time = agreement_over_time(**slice_filters)
    return render(
        request,
        "curation/agreement.html",
        {"form": form, "a": result, "cell_links": cell_links, "over_time_chart": charts.line_chart(over_time)},
    )
