"""The reviewer stage's pages: the reviewer queue (annotators' decisions awaiting a second look), and an annotator's
decisions that reviewers overturned, with their reasons. Settling a decision is a decision on the trajectory page
(curation.services.review_decide)."""

from django.contrib import messages
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.curation.selectors.second_look import (
    awaiting_batches,
    awaiting_page,
    awaiting_review,
    overturned_for,
)
from simia_web.curation.services import ReviewError, reviews_confirm_rest

from .common import int_or_none

# The reviewer queue shows this many decisions, and counts up to REVIEWER_COUNT_LIMIT.
REVIEWER_PAGE_SIZE = 50
REVIEWER_COUNT_LIMIT = 1_000


@role_required("reviewer")
def reviewer_queue(request):
    """The current workspace's decisions awaiting review: against the judge first, then the oldest."""
    queue = awaiting_review(workspace_ids=page_workspace_ids(request.user))
    count = queue.order_by()[: REVIEWER_COUNT_LIMIT + 1].count()  # counted unordered: no sort of the backlog
    context = {
        "rows": awaiting_page(queue, REVIEWER_PAGE_SIZE),
        "count": min(count, REVIEWER_COUNT_LIMIT),
        "count_capped": count > REVIEWER_COUNT_LIMIT,
        "page_size": REVIEWER_PAGE_SIZE,
        "batches": awaiting_batches(workspace_ids=page_workspace_ids(request.user)),
    }
    return render(request, "curation/reviewer_queue.html", context)


@role_required("annotator")
def overturned_list(request):
    """The reader's decisions that reviewers overturned, latest first, with who overturned them and why."""
    rows = overturned_for(user=request.user, workspace_ids=page_workspace_ids(request.user))
    return render(request, "curation/overturned.html", {"rows": list(rows[:REVIEWER_PAGE_SIZE])})


def _listed(values: list[str]) -> list[str]:
    """The ids posted as one comma-separated value (the page's form) or as a value each."""
    return [part for value in values for part in value.split(",")]


@role_required("reviewer")
@require_POST
def confirm_rest(request):
    """Confirm the rest of an annotator's batch, on the sample of their decisions settled one by one that the page
    showed (posted as `sample`, comma-separated)."""
    try:
        outcome = reviews_confirm_rest(
            annotator_id=int_or_none(request.POST.get("annotator")) or 0,
            reviewer=request.user,
            sample=[pk for pk in map(int_or_none, _listed(request.POST.getlist("sample"))) if pk is not None],
            workspace_ids=page_workspace_ids(request.user),
        )
    except ReviewError as exc:
        messages.error(request, f"Nothing confirmed: {exc}")
        return redirect("reviewer-queue")
    n = outcome.confirmed
    text = f"{n} decision{pluralize(n)} confirmed in bulk (batch {outcome.batch})."
    if outcome.held:
        text += f" {outcome.held} left: someone is working on {pluralize(outcome.held, 'it,them')} right now."
    messages.success(request, text)
    return redirect("reviewer-queue")
