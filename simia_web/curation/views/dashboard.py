"""The dashboard: counts and charts of the current workspace, read from the rollups of its domains."""

from django.shortcuts import render

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.catalog.selectors import domain_names
from simia_web.curation import charts
from simia_web.curation.models import TrajectoryStatus
from simia_web.curation.selectors.agreement import agreement
from simia_web.curation.selectors.dashboard import (
    jobs_running_and_recent,
    review_progress_by_domain,
    score_histogram,
    status_counts,
    throughput_per_annotator,
    verdicts_by_domain,
)
from simia_web.curation.selectors.first_steps import first_steps

from .common import int_or_none


@role_required("annotator")
def dashboard(request):
    workspace_ids = page_workspace_ids(request.user)
    counts = status_counts(workspace_ids=workspace_ids)
    # The score and verdict charts can be narrowed to one domain and/or job.
    chart_domain, chart_job = request.GET.get("domain") or None, int_or_none(request.GET.get("job"))
    active_jobs, recent_jobs = jobs_running_and_recent(workspace_ids=workspace_ids)
    scores = score_histogram(workspace_ids=workspace_ids, domain=chart_domain, job=chart_job)
    return render(
        request,
        "curation/dashboard.html",
        {
            "counts": [(value, label, counts[value]) for value, label in TrajectoryStatus.choices],
            "active_jobs": active_jobs,
            "recent_jobs": recent_jobs,
            "agreement": agreement(workspace_ids=workspace_ids, criteria=False),
            "progress_chart": charts.stacked_bar(
                review_progress_by_domain(workspace_ids=workspace_ids), charts.STATUS_COLOURS
            ),
            "throughput_chart": charts.line_chart(throughput_per_annotator(workspace_ids=workspace_ids)),
            "score_chart": charts.histogram(scores),
            "verdict_chart": charts.stacked_bar(
                verdicts_by_domain(workspace_ids=workspace_ids, job=chart_job), charts.VERDICT_COLOURS
            ),
            "chart_domain": chart_domain,
            "chart_job": chart_job,
            "domains": domain_names(workspace_ids=workspace_ids),
            "first_steps": first_steps(workspace_ids=workspace_ids) if request.user.has_role("curator") else None,
        },
    )
