"""What the review pages share: reading a request's numbers, links that carry the queue's filter, where a form
returns to, the decision just made, and the status a refused write answers with.

Every page works in the user's current workspace (`page_workspace_ids`): an item of another workspace is not found
(404), whatever the method."""

from collections.abc import Callable

from django.http import HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, render
from django.utils.http import url_has_allowed_host_and_scheme

from simia_web.accounts.scoping import page_workspace_ids
from simia_web.core.errors import HeldByOther
from simia_web.curation.models import Review, Trajectory
from simia_web.curation.selectors.trajectory import review_standing, trajectories_in, trajectory_detail_queryset
from simia_web.curation.services import ReviewError, review_decide
from simia_web.curation.versions import StaleVersion

# A refused write: the page says why, with this status (htmx swaps it too: see static/js/review.js).
CONFLICT = 409


def int_or_none(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def with_query(url: str, query: str, **extra) -> str:
    params = QueryDict(query, mutable=True)
    for name, value in extra.items():
        params[name] = value
    encoded = params.urlencode()
    return f"{url}?{encoded}" if encoded else url


def without(params, name):
    params = params.copy()
    params.pop(name, None)
    return params


def safe_next(request, target: str | None) -> str | None:
    """`target` when it is a URL on this site (a path, or this host over the request's scheme), else None."""
    if target and url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return None


def local_next(request, default: str) -> str:
    """Where a form asked to go back to (its `next` field), when that is a path on this site."""
    return safe_next(request, request.POST.get("next")) or default


def page_trajectory(request, pk: int, *fields: str) -> Trajectory:
    """Trajectory `pk` of the current workspace (only `fields` read, when named), else 404."""
    trajectories = trajectories_in(workspace_ids=page_workspace_ids(request.user))
    return get_object_or_404(trajectories.only(*fields) if fields else trajectories, pk=pk)


def last_review(request):
    """The decision just made, for the toast that offers to undo it (shown once, while it stands)."""
    review_id = request.session.pop("undo_review", None)
    if review_id is None:
        return None
    return review_standing(review_id)


def decision_posted(
    request, pk: int, *, page: Callable[[Trajectory, dict], dict], template: str
) -> Review | HttpResponse:
    """Accept or reject trajectory `pk` at the version the decision card posted. A refusal answers with the card
    (htmx) or the whole page (`template`), its context built by `page(trajectory, refusal)`, saying why."""
    workspace_ids = page_workspace_ids(request.user)
    trajectory = get_object_or_404(trajectories_in(workspace_ids=workspace_ids), pk=pk)
    try:
        return review_decide(
            trajectory=trajectory,
            reviewer=request.user,
            decision=request.POST.get("decision", ""),
            expected_version=int_or_none(request.POST.get("version")) or -1,
            reason=request.POST.get("reason", ""),
        )
    except (StaleVersion, HeldByOther, ReviewError) as exc:
        trajectory = get_object_or_404(trajectory_detail_queryset(workspace_ids=workspace_ids), pk=pk)
        stale = isinstance(exc, StaleVersion)
        refusal = {
            "conflict": exc if stale else None,
            "edit_error": None if stale else str(exc),
            "posted_reason": request.POST.get("reason", ""),
        }
        status = CONFLICT if isinstance(exc, StaleVersion | HeldByOther) else 400
        card = "curation/_decision.html" if request.htmx else template
        return render(request, card, page(trajectory, refusal), status=status)
