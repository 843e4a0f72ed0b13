"""One trajectory's page: reading it, deciding it, holding and releasing it, reverting it, judging it again and
undoing a decision."""

from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.core.errors import HeldByOther
from simia_web.curation.models import Decision, Review, ReviewStage, Trajectory
from simia_web.curation.selectors.gold import gold_feedback
from simia_web.curation.selectors.queue import (
    filter_query,
    next_free,
    queue_for,
    queue_has,
)
from simia_web.curation.selectors.review_page import trajectory_page_context
from simia_web.curation.selectors.second_look import awaiting_next
from simia_web.curation.selectors.trajectory import reviews_in, trajectory_detail_queryset
from simia_web.curation.services import (
    ReviewError,
    review_undo,
    trajectory_claim_next,
    trajectory_judge_again,
    trajectory_release,
    trajectory_reserve,
    trajectory_revert,
)
from simia_web.curation.versions import StaleVersion
from simia_web.formats import FormatError

from .common import decision_posted, int_or_none, last_review, page_trajectory, with_query


def _page_context(request, trajectory: Trajectory, **extra) -> dict:
    return trajectory_page_context(
        request,
        trajectory,
        workspace_ids=page_workspace_ids(request.user),
        last_review=last_review(request),
        **extra,
    )


@role_required("annotator")
def trajectory_page(request, pk: int):
    """Viewing never reserves: only the review stream (`stream=1`, reached through review_next) holds an item."""
    trajectories = trajectory_detail_queryset(workspace_ids=page_workspace_ids(request.user))
    trajectory = get_object_or_404(trajectories, pk=pk)
    return render(request, "curation/trajectory.html", _page_context(request, trajectory))


def _after_decision(request, pk: int) -> str:
    """Where a decision leads: in the stream, the next free item of the workspace's queue (claimed); otherwise the
    next item nobody else holds, to view."""
    query = filter_query(request.GET)
    if request.GET.get("second_look") == "1":  # from the reviewer queue: its next item
        next_id = awaiting_next(workspace_ids=page_workspace_ids(request.user), user=request.user, after_id=pk)
        if next_id is None:
            return reverse("reviewer-queue")
        return with_query(reverse("trajectory", args=[next_id]), "", second_look="1")
    _, qs, sort = queue_for(request.GET, request, workspace_ids=page_workspace_ids(request.user))
    if request.GET.get("stream") == "1":
        after = pk if queue_has(qs, pk) else None
        claimed = trajectory_claim_next(queue=qs, user=request.user, after_id=after, sort=sort)
        if claimed is not None:
            return with_query(reverse("trajectory", args=[claimed.pk]), query, stream="1")
        messages.info(request, "That was the last free item with these filters.")
        return with_query(reverse("review-queue"), query)
    next_id = next_free(queue=qs, user=request.user, after_id=pk, sort=sort)
    target = reverse("trajectory", args=[next_id]) if next_id else reverse("review-queue")
    return with_query(target, query)


def decided(request, review: Review, target: str | None = None) -> HttpResponse:
    """Say what was decided, offer its undo on the next page, and go on: to `target` when given (a page that sent
    the annotator here), else where a decision on the review page leads."""
    label = dict(Decision.choices)[review.decision].lower()
    waits = " It waits for a reviewer's confirmation before it counts." if review.stage == ReviewStage.AWAITING else ""
    messages.success(request, f"Trajectory {review.trajectory_id}: {label}.{waits}")
    if review.stage == ReviewStage.GOLD:
        feedback = gold_feedback(trajectory=review.trajectory, answer=review)
        messages.info(request, feedback.said() if feedback else "That was a gold item.")
    request.session["undo_review"] = review.pk
    target = target or _after_decision(request, review.trajectory_id)
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


@role_required("annotator")
@require_POST
def trajectory_decide(request, pk: int):
    decision = request.POST.get("decision", "")
    if decision == Decision.FIX_ACCEPT:
        page_trajectory(request, pk, "pk")  # the editor is the workspace's item's only
        return redirect(with_query(reverse("trajectory-edit", args=[pk]), request.GET.urlencode()))
    review = decision_posted(
        request,
        pk,
        page=lambda trajectory, refusal: _page_context(request, trajectory, **refusal),
        template="curation/trajectory.html",
    )
    if isinstance(review, HttpResponse):
        return review
    return decided(request, review)


@role_required("annotator")
@require_POST
def trajectory_reservation(request, pk: int):
    """Renew (the open stream page, on a timer) or release (the Release button, or leaving the page) a hold."""
    trajectory = page_trajectory(request, pk, "pk", "reserved_by", "reserved_until")
    if request.POST.get("action") == "release":
        trajectory_release(trajectory_id=pk, user=request.user)
        if request.POST.get("next") == "queue":
            messages.info(request, f"Trajectory {pk} released.")
            return redirect(with_query(reverse("review-queue"), filter_query(request.GET)))
        return HttpResponse(status=204)
    held = trajectory_reserve(trajectory=trajectory, user=request.user)
    holder = None if held else trajectory.reserved_by
    return JsonResponse(
        {
            "held": held,
            "holder": getattr(holder, "username", None),
            "until": trajectory.reserved_until.isoformat() if trajectory.reserved_until else None,
        }
    )


@role_required("annotator")
@require_POST
def trajectory_revert_view(request, pk: int):
    trajectory = page_trajectory(request, pk)
    to_version = int_or_none(request.POST.get("to_version")) or 0
    try:
        trajectory_revert(
            trajectory=trajectory,
            to_version=to_version,
            expected_version=int_or_none(request.POST.get("version")) or -1,
            actor=request.user,
        )
        messages.success(
            request,
            f"Trajectory {pk}: version {to_version}'s text is now version {trajectory.version}; undecided again.",
        )
    except (StaleVersion, HeldByOther, ReviewError, FormatError) as exc:
        messages.error(request, f"Not reverted: {exc}")
    return redirect(with_query(reverse("trajectory", args=[pk]), filter_query(request.GET)))


@role_required("curator")
@require_POST
def trajectory_judge_again_view(request, pk: int):
    """Queue the judge on the current version (an LLM call: curators decide when it is worth it)."""
    trajectory = page_trajectory(request, pk, "pk", "version")
    job = trajectory_judge_again(trajectory=trajectory, actor=request.user)
    messages.success(request, f"Judging version {trajectory.version}: job {job.pk}.")
    return redirect(with_query(reverse("trajectory", args=[pk]), filter_query(request.GET)))


@role_required("annotator")
@require_POST
def review_undo_view(request, pk: int):
    """Undo keeps the annotator in the stream, on the item they took the decision back from (they hold it)."""
    review = get_object_or_404(reviews_in(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    query = filter_query(request.GET)
    try:
        review_undo(review=review, actor=request.user)
    except (StaleVersion, HeldByOther, ReviewError) as exc:
        messages.error(request, f"Not undone: {exc}")
        return redirect(with_query(reverse("trajectory", args=[review.trajectory_id]), query))
    messages.success(request, f"Undone: trajectory {review.trajectory_id} waits for your decision again.")
    return redirect(with_query(reverse("trajectory", args=[review.trajectory_id]), query, stream="1"))
