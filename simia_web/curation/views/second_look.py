"""The reviewer stage's pages: the reviewer queue (annotators' decisions awaiting a second look), and an annotator's
decisions that reviewers overturned, with their reasons. Settling a decision is a decision on the trajectory page
(curation.services.review_decide)."""

from django.shortcuts import render

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.curation.selectors.second_look import awaiting_review, overturned_for

# The reviewer queue shows this many decisions, and counts up to REVIEWER_COUNT_LIMIT.
REVIEWER_PAGE_SIZE = 100
REVIEWER_COUNT_LIMIT = 1_000


@role_required("reviewer")
def reviewer_queue(request):
    """The current workspace's decisions awaiting review: against the judge first, then the oldest."""
    queue = awaiting_review(workspace_ids=page_workspace_ids(request.user))
    count = queue[: REVIEWER_COUNT_LIMIT + 1].count()
    context = {
        "rows": list(queue[:REVIEWER_PAGE_SIZE]),
        "count": min(count, REVIEWER_COUNT_LIMIT),
        "count_capped": count > REVIEWER_COUNT_LIMIT,
        "page_size": REVIEWER_PAGE_SIZE,
    }
    return render(request, "curation/reviewer_queue.html", context)


@role_required("annotator")
def overturned_list(request):
    """The reader's decisions that reviewers overturned, latest first, with who overturned them and why."""
    rows = overturned_for(user=request.user, workspace_ids=page_workspace_ids(request.user))
    return render(request, "curation/overturned.html", {"rows": list(rows[:REVIEWER_PAGE_SIZE])})
