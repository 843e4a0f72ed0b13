"""The review queue: its page (filtered, sorted, keyset-paged) and the review stream that claims its items one by
one."""

from django.contrib import messages
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.catalog.selectors import domain_names
from simia_web.curation.filters import PENDING
from simia_web.curation.forms import (
    BulkForm,
)
from simia_web.curation.models import Trajectory, TrajectoryStatus
from simia_web.curation.selectors import queue as queue_reads
from simia_web.curation.selectors.queue import (
    DEFAULT_SORT,
    filter_query,
    queue_for,
    queue_page,
    queue_reviewable,
    queue_search_entries,
    violation_codes,
)
from simia_web.curation.services import (
    trajectory_claim_next,
    trajectory_hold,
)

from .common import int_or_none, last_review, with_query, without

QUEUE_PAGE_SIZE = 50
# A text search counts its matches up to here ("500+", ten pages): counting a common word matches every row.
SEARCH_COUNT_LIMIT = 500
# A bulk decision over more items than this runs as a job (with progress) rather than inside the request.
BULK_IN_REQUEST_MAX = 1_000
STATUS_CHOICES = [(PENDING, "Waiting for review"), ("all", "Any status"), *TrajectoryStatus.choices]


@role_required("annotator")
def review_queue(request):
    """The queue of the current workspace's trajectories."""
    workspace_ids = page_workspace_ids(request.user)
    filterset, qs, sort = queue_for(request.GET, request, workspace_ids=workspace_ids)
    page = queue_page(
        qs,
        sort,
        search=queue_search_entries(filterset, page_size=QUEUE_PAGE_SIZE, workspace_ids=workspace_ids),
        number=int_or_none(request.GET.get("page")) or 1,
        after=int_or_none(request.GET.get("after")),
        before=int_or_none(request.GET.get("before")),
        size=QUEUE_PAGE_SIZE,
        count_limit=SEARCH_COUNT_LIMIT if request.GET.get("q") else queue_reads.QUEUE_COUNT_LIMIT,
    )
    query = filter_query(request.GET)
    context = {
        "filterset": filterset,
        "form": filterset.form,
        "domains": domain_names(workspace_ids=workspace_ids),
        "page": page,
        "query": query,
        "sort": sort or DEFAULT_SORT,
        "sort_query": filter_query(without(request.GET, "sort")),
        "query_params": [(k, v) for k, v in QueryDict(query).items() if k != "page"],
        "status_choices": STATUS_CHOICES,
        "now": timezone.now(),
        "violation_codes": violation_codes(workspace_ids=workspace_ids),
        "bulk_form": BulkForm(workspace_ids=workspace_ids) if request.user.has_role("curator") else None,
        "last_review": last_review(request),
        "last_bulk": request.session.pop("undo_bulk", None),
    }
    return render(request, "curation/queue.html", context)


@role_required("annotator")
@require_POST
def review_next(request):
    """The review stream: claim the next free item of the current workspace's filtered queue (after `after`) and
    open it; with `here`, the item being viewed when it is free ("Start reviewing from here")."""
    query = filter_query(request.GET)
    _, qs, sort = queue_for(request.GET, request, workspace_ids=page_workspace_ids(request.user))
    here = queue_reviewable(qs, int_or_none(request.POST.get("here")))
    if here is not None and trajectory_hold(trajectory=here, user=request.user):
        claimed: Trajectory | None = here
    else:
        after = int_or_none(request.POST.get("after"))
        claimed = trajectory_claim_next(queue=qs, user=request.user, after_id=after, sort=sort)
    if claimed is None:
        messages.info(request, "Nothing left to review with these filters: every item is decided or held by someone.")
        target = with_query(reverse("review-queue"), query)
    else:
        target = with_query(reverse("trajectory", args=[claimed.pk]), query, stream="1")
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)
