"""Pages of the annotators' workspace: dashboard, review queue, trajectory review, agreement."""

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from simia_web.accounts.permissions import role_required
from simia_web.core.json_input import json_parse
from simia_web.core.selectors import revision_list
from simia_web.core.services import VersionConflict
from simia_web.jobs.models import ACTIVE_JOB_STATUSES, Job
from simia_web.llm.models import EndpointProfile

from . import selectors
from .forms import AgreementFilterForm, BulkForm, QueueFilterForm
from .models import Decision, Trajectory, TrajectoryStatus
from .services import ReviewError, review_decide, reviews_bulk, trajectories_assign, trajectory_reserve

QUEUE_PAGE_SIZE = 50


def _queue(request, params=None):
    form = QueueFilterForm((params if params is not None else request.GET) or None)
    return form, selectors.review_queue(form.filters(request.user))


def _filter_query(request) -> str:
    """The queue's filter parameters, carried from the queue to the trajectory page and back."""
    params = request.GET.copy()
    params.pop("page", None)
    return params.urlencode()


@role_required("annotator")
def dashboard(request):
    counts = selectors.status_counts()
    active_jobs = list(Job.objects.filter(status__in=ACTIVE_JOB_STATUSES).order_by("-id")[:10])
    return render(
        request,
        "curation/dashboard.html",
        {
            "counts": [(value, label, counts[value]) for value, label in TrajectoryStatus.choices],
            "active_jobs": active_jobs,
            "recent_jobs": Job.objects.exclude(status__in=ACTIVE_JOB_STATUSES).order_by("-id")[:5],
            "agreement": selectors.agreement(criteria=False),
        },
    )


@role_required("annotator")
def review_queue(request):
    form, qs = _queue(request)
    page = Paginator(selectors.queue_page_rows(qs), QUEUE_PAGE_SIZE).get_page(request.GET.get("page"))
    context = {
        "form": form,
        "page": page,
        "query": _filter_query(request),
        "now": timezone.now(),
        "violation_codes": selectors.violation_codes(),
        "bulk_form": BulkForm() if request.user.has_role("curator") else None,
    }
    return render(request, "curation/queue.html", context)


@role_required("curator")
@require_POST
def review_bulk(request):
    form = BulkForm(request.POST)
    query = request.POST.get("query", "")
    back = f"{reverse('review-queue')}?{query}" if query else reverse("review-queue")
    if not form.is_valid():
        errors = "; ".join(e for field_errors in form.errors.values() for e in field_errors)
        messages.error(request, f"Nothing changed: {errors}")
        return redirect(back)
    _, qs = _queue(request, QueryDict(query))
    data = form.cleaned_data
    if data["scope"] == "selected":
        qs = qs.filter(pk__in=data["ids"])
    qs = qs.order_by()
    try:
        if data["action"] in ("accept", "reject"):
            n = reviews_bulk(trajectories=qs, reviewer=request.user, decision=data["action"], reason=data["reason"])
            messages.success(request, f"{n} trajectories {data['action']}ed.")
        else:
            assignee = data["assignee"] if data["action"] == "assign" else None
            n = trajectories_assign(trajectories=qs, assignee=assignee, actor=request.user)
            who = assignee.username if assignee else "nobody"
            messages.success(request, f"{n} trajectories assigned to {who}.")
    except ReviewError as exc:
        messages.error(request, str(exc))
    return redirect(back)


def _trajectory_context(request, trajectory: Trajectory, **extra) -> dict:
    verdicts = list(trajectory.verdicts.all())
    latest = verdicts[0] if verdicts else None
    cited = set(latest.cited_messages or []) if latest else set()
    _, qs = _queue(request)
    previous_id, next_id, position = selectors.queue_neighbours(qs, trajectory.pk)
    context = {
        "t": trajectory,
        "items": selectors.chat_items(trajectory, cited),
        "verdict": latest,
        "verdict_scores": sorted((latest.scores or {}).items()) if latest else [],
        "older_verdicts": verdicts[1:],
        "reviews": list(trajectory.reviews.all()),
        "holder": selectors.reservation_holder(trajectory, request.user),
        "query": _filter_query(request),
        "previous_id": previous_id,
        "next_id": next_id,
        "position": position,
        "editable": selectors.editable_messages(trajectory, posted=request.POST if request.method == "POST" else None),
        "messages_json": selectors.pretty_json(trajectory.messages),
        "tools_json": selectors.pretty_json(trajectory.tools),
        "revisions": list(revision_list(obj=trajectory)[:20]),
    }
    context.update(extra)
    return context


@role_required("annotator")
def trajectory_page(request, pk: int):
    trajectory = get_object_or_404(Trajectory.objects.only("pk"), pk=pk)
    trajectory_reserve(trajectory=trajectory, user=request.user)
    trajectory = selectors.trajectory_detail(pk)
    return render(request, "curation/trajectory.html", _trajectory_context(request, trajectory))


def _edited_messages(request, trajectory: Trajectory) -> list:
    """The messages after an inline edit: either the whole JSON or per-message text fields."""
    if request.POST.get("mode") == "json":
        try:
            return json_parse(request.POST.get("messages_json", ""), where="messages_json")
        except ValueError as exc:
            raise ReviewError(f"The messages are not valid JSON: {exc}") from exc
    edited = [dict(m) for m in trajectory.messages]
    for i, message in enumerate(edited):
        key = f"content-{i}"
        if key in request.POST and (isinstance(message.get("content"), str) or message.get("content") is None):
            text = request.POST[key].replace("\r\n", "\n")
            if text != (message.get("content") or ""):
                message["content"] = text
    return edited


@role_required("annotator")
@require_POST
def trajectory_decide(request, pk: int):
    trajectory = get_object_or_404(Trajectory, pk=pk)
    decision = request.POST.get("decision", "")
    try:
        expected = int(request.POST.get("version", ""))
    except ValueError:
        expected = -1
    edit_error = conflict = None
    try:
        edited = _edited_messages(request, trajectory) if decision == Decision.FIX_ACCEPT else None
        review_decide(
            trajectory=trajectory,
            reviewer=request.user,
            decision=decision,
            expected_version=expected,
            reason=request.POST.get("reason", ""),
            messages=edited,
        )
    except VersionConflict as exc:
        conflict = exc
    except ReviewError as exc:
        edit_error = str(exc)
    if conflict or edit_error:
        trajectory = selectors.trajectory_detail(pk)
        context = _trajectory_context(
            request,
            trajectory,
            conflict=conflict,
            edit_error=edit_error,
            posted_json=request.POST.get("messages_json", "") if request.POST.get("mode") == "json" else "",
            posted_reason=request.POST.get("reason", ""),
        )
        template = "curation/_decision.html" if request.htmx else "curation/trajectory.html"
        return render(request, template, context, status=200 if request.htmx else 409)
    label = dict(Decision.choices)[decision].lower()
    messages.success(request, f"Trajectory {pk}: {label}.")
    query = _filter_query(request)
    _, qs = _queue(request)
    _, next_id, _ = selectors.queue_neighbours(qs, pk)
    if next_id is None:  # the decided item left the (pending) queue: take the new head
        next_id = qs.exclude(pk=pk).values_list("pk", flat=True).first()
    target = reverse("trajectory", args=[next_id]) if next_id else reverse("review-queue")
    target = f"{target}?{query}" if query else target
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


@role_required("annotator")
def agreement_page(request):
    profiles = list(EndpointProfile.objects.order_by("name"))
    form = AgreementFilterForm(request.GET or None, profiles=profiles)
    data = form.cleaned_data if form.is_valid() else {}
    result = selectors.agreement(
        domain=data["domain"].pk if data.get("domain") else None, job=data.get("job"), profile=data.get("profile")
    )
    return render(request, "curation/agreement.html", {"form": form, "a": result})
