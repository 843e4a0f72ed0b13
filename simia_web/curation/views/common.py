"""What the workspace's pages share: reading a request's numbers, links that carry the queue's filter, where a
form returns to, the decision just made, and the status a refused write answers with."""

from django.http import QueryDict
from django.utils.http import url_has_allowed_host_and_scheme

from simia_web.curation.selectors.trajectory import review_standing

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


def last_review(request):
    """The decision just made, for the toast that offers to undo it (shown once, while it stands)."""
    review_id = request.session.pop("undo_review", None)
    if review_id is None:
        return None
    return review_standing(review_id)
