"""Bulk actions from the review queue: accept, reject or assign the selected or filtered items, confirm, queue
the largest as a job, and undo."""

import uuid

from django.contrib import messages
from django.http import QueryDict
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.curation.forms import (
    BulkForm,
)
from simia_web.curation.selectors.bulk import bulk_preview
from simia_web.curation.selectors.queue import (
    queue_for,
    queue_selection,
)
from simia_web.curation.services import (
    BULK_UNDO_MAX,
    BulkUndoTooLarge,
    ReviewError,
    reviews_bulk,
    reviews_bulk_queue,
    reviews_bulk_undo,
    reviews_bulk_undo_queue,
    reviews_send_back,
    trajectories_assign,
)

from .common import local_next, with_query
from .queue import QUEUE_PAGE_SIZE

# A bulk decision over more items than this runs as a job (with progress) rather than inside the request.
BULK_IN_REQUEST_MAX = 1_000


@role_required("curator")
@require_POST
def review_bulk(request):
    """Decide or assign the selected items, or every item the filter matches, of the current workspace's queue."""
    workspace_ids = page_workspace_ids(request.user)
    form = BulkForm(request.POST, workspace_ids=workspace_ids)
    query = request.POST.get("query", "")
    back = with_query(reverse("review-queue"), query)
    if not form.is_valid():
        errors = "; ".join(str(e) for field_errors in form.errors.values() for e in field_errors)
        messages.error(request, f"Nothing changed: {errors}")
        return redirect(back)
    _, qs, _ = queue_for(QueryDict(query), request, workspace_ids=workspace_ids)
    data = form.cleaned_data
    qs = queue_selection(qs, data["ids"] if data["scope"] == "selected" else None)
    action = data["action"]
    if action == "send_back":
        return _send_back(request, qs, data, back)
    if (
        action in ("accept", "reject")
        and data["scope"] == "all"
        and qs[: BULK_IN_REQUEST_MAX + 1].count() > BULK_IN_REQUEST_MAX
    ):
        return _bulk_job(request, data, query)
    if action in ("accept", "reject"):
        preview = bulk_preview(trajectories=qs, reviewer=request.user, decision=action)
        needs_confirmation = data["scope"] == "all" or preview.changed > QUEUE_PAGE_SIZE or preview.decided
        if needs_confirmation and data.get("confirmed") != preview.changed:
            return render(
                request,
                "curation/bulk_confirm.html",
                {
                    "preview": preview,
                    "data": data,
                    "query": query,
                    "changed_since": data.get("confirmed") is not None,
                    "bulk_undo_max": BULK_UNDO_MAX,
                },
            )
        try:
            outcome = reviews_bulk(trajectories=qs, reviewer=request.user, decision=action, reason=data["reason"])
        except ReviewError as exc:
            messages.error(request, str(exc))
            return redirect(back)
        if outcome.batch:  # its toast's Undo takes it back, within the request or, past BULK_UNDO_MAX, in a job
            request.session["undo_bulk"] = {"batch": str(outcome.batch), "summary": bulk_summary(outcome, action)}
        else:
            messages.success(request, bulk_summary(outcome, action))
    else:
        assignee = data["assignee"] if action == "assign" else None
        n = trajectories_assign(trajectories=qs, assignee=assignee, actor=request.user)
        who = assignee.username if assignee else "nobody"
        messages.success(request, f"{n} trajector{'y' if n == 1 else 'ies'} assigned to {who}.")
    return redirect(back)


def _send_back(request, qs, data: dict, back: str):
    """Send the selected or filtered decided items back for review (their guidelines changed), up to
    BULK_IN_REQUEST_MAX at once."""
    if qs[: BULK_IN_REQUEST_MAX + 1].count() > BULK_IN_REQUEST_MAX:
        messages.error(
            request, f"Nothing changed: send back at most {BULK_IN_REQUEST_MAX} items at once (narrow the filter)."
        )
        return redirect(back)
    outcome = reviews_send_back(trajectories=qs, actor=request.user, reason=data["reason"])
    parts = [
        f"{outcome.sent_back} {pluralize(outcome.sent_back, 'trajectory waits,trajectories wait')} for review again."
    ]
    if outcome.held:
        parts.append(f"{outcome.held} skipped: someone is reviewing {pluralize(outcome.held, 'it,them')} right now.")
    if outcome.undecided:
        parts.append(f"{outcome.undecided} had no decision to send back.")
    messages.success(request, " ".join(parts))
    return redirect(back)


def _bulk_job(request, data: dict, query: str):
    """A bulk decision over more than BULK_IN_REQUEST_MAX items: confirmed as "more than" that, then queued as a job
    whose page shows its progress and, at the end, its counts."""
    if data.get("confirmed") != BULK_IN_REQUEST_MAX + 1:
        context = {"data": data, "query": query, "as_job": True, "more_than": BULK_IN_REQUEST_MAX}
        return render(request, "curation/bulk_confirm.html", context)
    job = reviews_bulk_queue(
        query=query,
        reviewer=request.user,
        decision=data["action"],
        reason=data["reason"],
        workspace_id=request.user.current_workspace_id,
    )
    messages.success(request, f"Bulk {data['action']} of every item matching the filter runs as job {job.pk}.")
    return redirect("job-detail", pk=job.pk)


def bulk_summary(outcome, action: str) -> str:
    noun = "trajectory" if outcome.changed == 1 else "trajectories"
    parts = [f"{outcome.changed} {noun} {action}ed."]
    if outcome.decided:
        n = outcome.decided
        parts.append(
            f"{n} left as {pluralize(n, 'it was,they were')}: a person had already decided "
            f"{pluralize(n, 'it,them')} one by one."
        )
    if outcome.held:
        parts.append(f"{outcome.held} skipped: someone is reviewing {pluralize(outcome.held, 'it,them')} right now.")
    if outcome.unreviewable:
        n = outcome.unreviewable
        parts.append(f"{n} skipped: empty or errored, {pluralize(n, 'it,they')} cannot be accepted.")
    return " ".join(parts)


def _bulk_undo_job(request, batch, workspace_ids: list[int], back: str):
    """Queue the undo of a bulk decision too large for the request, and show its job."""
    try:
        job = reviews_bulk_undo_queue(batch=batch, actor=request.user, workspace_ids=workspace_ids)
    except ReviewError as exc:
        messages.error(request, f"Not undone: {exc}")
        return redirect(back)
    messages.success(request, f"Job {job.pk} queued: it undoes the bulk decision in ranges of its items.")
    return redirect("job-detail", job.pk)


@role_required("curator")
@require_POST
def review_bulk_undo(request):
    """Take back a bulk decision (the toast's Undo, or a bulk-decision job page's), item by item where nothing
    changed since: within the request up to BULK_UNDO_MAX items, a larger one by a job."""
    back = local_next(request, with_query(reverse("review-queue"), request.POST.get("query", "")))
    try:
        batch = uuid.UUID(request.POST.get("batch", ""))
    except ValueError:
        messages.error(request, "Not undone: that is not a bulk decision.")
        return redirect(back)
    workspace_ids = page_workspace_ids(request.user)
    try:
        outcome = reviews_bulk_undo(batch=batch, actor=request.user, workspace_ids=workspace_ids)
    except BulkUndoTooLarge:
        return _bulk_undo_job(request, batch, workspace_ids, back)
    except ReviewError as exc:
        messages.error(request, f"Not undone: {exc}")
        return redirect(back)
    parts = [
        f"Undone: {outcome.undone} {pluralize(outcome.undone, 'trajectory waits,trajectories wait')} for review again."
    ]
    if outcome.moved_on:
        n = outcome.moved_on
        parts.append(f"{n} left as {pluralize(n, 'it was,they were')}: changed since the bulk decision.")
    if outcome.held:
        n = outcome.held
        parts.append(f"{n} left as {pluralize(n, 'it was,they were')}: someone is reviewing {pluralize(n, 'it,them')}.")
    messages.success(request, " ".join(parts))
    return redirect(back)
