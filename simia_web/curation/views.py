"""Pages of the annotators' workspace: dashboard, review queue and stream, trajectory review and editor, agreement."""

import uuid
from typing import Any

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse, JsonResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils import timezone
from django.utils.datastructures import MultiValueDict
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from simia_web.accounts.permissions import role_required
from simia_web.catalog.selectors import domain_names
from simia_web.core.clipping import (
    EDIT_MAX_BYTES,
    clipped,
    message_href,
    message_page,
    shown_in_full,
    too_large_to_edit,
)
from simia_web.core.display import pretty_json
from simia_web.core.errors import HeldByOther
from simia_web.formats import FormatError
from simia_web.formats.conversation import tool_schemas

from . import charts
from .duplicates import trajectory_duplicates
from .filters import PENDING
from .forms import (
    AgreementFilterForm,
    BulkForm,
    editor_blocks,
    editor_blocks_posted,
    editor_error_field,
    editor_messages,
    tool_call_check,
)
from .models import PENDING_STATUSES, Decision, Review, Trajectory, TrajectoryStatus
from .selectors.agreement import agreement, agreement_over_time, judge_profiles
from .selectors.bulk import bulk_preview
from .selectors.conversation import chat_items, revision_history
from .selectors.dashboard import (
    jobs_running_and_recent,
    review_progress_by_domain,
    score_histogram,
    status_counts,
    throughput_per_annotator,
    verdicts_by_domain,
)
from .selectors.first_steps import first_steps
from .selectors.queue import (
    DEFAULT_SORT,
    next_free,
    queue_filterset,
    queue_has,
    queue_neighbours,
    queue_ordered,
    queue_page,
    queue_reviewable,
    queue_search_entries,
    queue_selection,
    violation_codes,
)
from .selectors.trajectory import (
    draft_for,
    reservation_holder,
    review_standing,
    standing_review,
    trajectory_detail_queryset,
    verdicts_split,
)
from .services import (
    BULK_UNDO_MAX,
    ReviewError,
    draft_discard,
    draft_save,
    review_decide,
    review_undo,
    reviews_bulk,
    reviews_bulk_queue,
    reviews_bulk_undo,
    trajectories_assign,
    trajectory_claim_next,
    trajectory_edit,
    trajectory_hold,
    trajectory_judge_again,
    trajectory_release,
    trajectory_reserve,
    trajectory_revert,
)
from .versions import StaleVersion, changes_since

QUEUE_PAGE_SIZE = 50
# A text search counts its matches up to here ("500+", ten pages): counting a common word matches every row.
SEARCH_COUNT_LIMIT = 500
# Any other queue counts up to here ("10,000+", two hundred pages; an item's place likewise): an exact count of a
# queue of a million reads every entry of its index on every page. Further pages are reached by Next.
QUEUE_COUNT_LIMIT = 10_000
# A bulk decision over more items than this runs as a job (with progress) rather than inside the request.
BULK_IN_REQUEST_MAX = 1_000
STATUS_CHOICES = [(PENDING, "Waiting for review"), ("all", "Any status"), *TrajectoryStatus.choices]
# Parameters that move through the queue rather than filter it.
# The review page's list of tools is cut here (the editor and exports have them all), and its sidebar lists this
# many cited messages and rule violations.
TOOLS_CHARS = 20_000
SIDEBAR_ITEMS = 50
NAVIGATION = ("page", "after", "before", "stream", "full")


def _queue(request, params=None):
    """The filtered, ordered queue for these parameters (the queue page's default status is `pending`)."""
    params = params if params is not None else request.GET
    filterset = queue_filterset(params=params, request=request)
    sort = params.get("sort")
    return filterset, queue_ordered(filterset.qs, sort), sort


def _filter_query(request, params=None) -> str:
    """The queue's filter and sort parameters, carried from the queue to the trajectory page and back."""
    params = (params if params is not None else request.GET).copy()
    for name in NAVIGATION:
        params.pop(name, None)
    return params.urlencode()


def _with_query(url: str, query: str, **extra) -> str:
    params = QueryDict(query, mutable=True)
    for name, value in extra.items():
        params[name] = value
    encoded = params.urlencode()
    return f"{url}?{encoded}" if encoded else url


def local_next(request, default: str) -> str:
    """Where a form asked to go back to (its `next` field), when that is a path on this site."""
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}):
        return target
    return default


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


@role_required("annotator")
def dashboard(request):
    counts = status_counts()
    # The score and verdict charts can be narrowed to one domain and/or job.
    chart_domain, chart_job = request.GET.get("domain") or None, _int(request.GET.get("job"))
    active_jobs, recent_jobs = jobs_running_and_recent()
    return render(
        request,
        "curation/dashboard.html",
        {
            "counts": [(value, label, counts[value]) for value, label in TrajectoryStatus.choices],
            "active_jobs": active_jobs,
            "recent_jobs": recent_jobs,
            "agreement": agreement(criteria=False),
            "progress_chart": charts.stacked_bar(review_progress_by_domain(), charts.STATUS_COLOURS),
            "throughput_chart": charts.line_chart(throughput_per_annotator()),
            "score_chart": charts.histogram(score_histogram(domain=chart_domain, job=chart_job)),
            "verdict_chart": charts.stacked_bar(verdicts_by_domain(job=chart_job), charts.VERDICT_COLOURS),
            "chart_domain": chart_domain,
            "chart_job": chart_job,
            "domains": domain_names(),
            "first_steps": first_steps() if request.user.has_role("curator") else None,
        },
    )


@role_required("annotator")
def review_queue(request):
    filterset, qs, sort = _queue(request)
    page = queue_page(
        qs,
        sort,
        search=queue_search_entries(filterset, page_size=QUEUE_PAGE_SIZE),
        number=_int(request.GET.get("page")) or 1,
        after=_int(request.GET.get("after")),
        before=_int(request.GET.get("before")),
        size=QUEUE_PAGE_SIZE,
        count_limit=SEARCH_COUNT_LIMIT if request.GET.get("q") else QUEUE_COUNT_LIMIT,
    )
    query = _filter_query(request)
    context = {
        "filterset": filterset,
        "form": filterset.form,
        "domains": domain_names(),
        "page": page,
        "query": query,
        "sort": sort or DEFAULT_SORT,
        "sort_query": _filter_query(request, _without(request.GET, "sort")),
        "query_params": [(k, v) for k, v in QueryDict(query).items() if k != "page"],
        "status_choices": STATUS_CHOICES,
        "now": timezone.now(),
        "violation_codes": violation_codes(),
        "bulk_form": BulkForm() if request.user.has_role("curator") else None,
        "last_review": _last_review(request),
        "last_bulk": request.session.pop("undo_bulk", None),
    }
    return render(request, "curation/queue.html", context)


def _without(params, name):
    params = params.copy()
    params.pop(name, None)
    return params


@role_required("annotator")
@require_POST
def review_next(request):
    """The review stream: claim the next free item of the filtered queue (after `after`) and open it; with `here`,
    the item being viewed when it is free ("Start reviewing from here")."""
    query = _filter_query(request)
    _, qs, sort = _queue(request)
    here = queue_reviewable(qs, _int(request.POST.get("here")))
    if here is not None and trajectory_hold(trajectory=here, user=request.user):
        claimed: Trajectory | None = here
    else:
        after = _int(request.POST.get("after"))
        claimed = trajectory_claim_next(queue=qs, user=request.user, after_id=after, sort=sort)
    if claimed is None:
        messages.info(request, "Nothing left to review with these filters: every item is decided or held by someone.")
        target = _with_query(reverse("review-queue"), query)
    else:
        target = _with_query(reverse("trajectory", args=[claimed.pk]), query, stream="1")
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


@role_required("annotator")
@require_POST
def trajectory_reservation(request, pk: int):
    """Renew (the open stream page, on a timer) or release (the Release button, or leaving the page) a hold."""
    if request.POST.get("action") == "release":
        trajectory_release(trajectory_id=pk, user=request.user)
        if request.POST.get("next") == "queue":
            messages.info(request, f"Trajectory {pk} released.")
            return redirect(_with_query(reverse("review-queue"), _filter_query(request)))
        return HttpResponse(status=204)
    trajectory = get_object_or_404(Trajectory.objects.only("pk"), pk=pk)
    held = trajectory_reserve(trajectory=trajectory, user=request.user)
    holder = None if held else trajectory.reserved_by
    return JsonResponse(
        {
            "held": held,
            "holder": getattr(holder, "username", None),
            "until": trajectory.reserved_until.isoformat() if trajectory.reserved_until else None,
        }
    )


def _last_review(request):
    """The decision just made, for the toast that offers to undo it (shown once, while it stands)."""
    review_id = request.session.pop("undo_review", None)
    if review_id is None:
        return None
    return review_standing(review_id)


@role_required("curator")
@require_POST
def review_bulk(request):
    form = BulkForm(request.POST)
    query = request.POST.get("query", "")
    back = _with_query(reverse("review-queue"), query)
    if not form.is_valid():
        errors = "; ".join(str(e) for field_errors in form.errors.values() for e in field_errors)
        messages.error(request, f"Nothing changed: {errors}")
        return redirect(back)
    _, qs, _ = _queue(request, QueryDict(query))
    data = form.cleaned_data
    qs = queue_selection(qs, data["ids"] if data["scope"] == "selected" else None)
    action = data["action"]
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
        if outcome.batch and outcome.changed <= BULK_UNDO_MAX:
            request.session["undo_bulk"] = {"batch": str(outcome.batch), "summary": bulk_summary(outcome, action)}
        else:
            messages.success(request, bulk_summary(outcome, action))
    else:
        assignee = data["assignee"] if action == "assign" else None
        n = trajectories_assign(trajectories=qs, assignee=assignee, actor=request.user)
        who = assignee.username if assignee else "nobody"
        messages.success(request, f"{n} trajector{'y' if n == 1 else 'ies'} assigned to {who}.")
    return redirect(back)


def _bulk_job(request, data: dict, query: str):
    """A bulk decision over more than BULK_IN_REQUEST_MAX items: confirmed as "more than" that, then queued as a job
    whose page shows its progress and, at the end, its counts."""
    if data.get("confirmed") != BULK_IN_REQUEST_MAX + 1:
        context = {"data": data, "query": query, "as_job": True, "more_than": BULK_IN_REQUEST_MAX}
        return render(request, "curation/bulk_confirm.html", context)
    job = reviews_bulk_queue(query=query, reviewer=request.user, decision=data["action"], reason=data["reason"])
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


@role_required("curator")
@require_POST
def review_bulk_undo(request):
    """Take back the bulk decision just made (its toast's Undo), item by item where nothing changed since."""
    back = local_next(request, _with_query(reverse("review-queue"), request.POST.get("query", "")))
    try:
        batch = uuid.UUID(request.POST.get("batch", ""))
    except ValueError:
        messages.error(request, "Not undone: that is not a bulk decision.")
        return redirect(back)
    try:
        outcome = reviews_bulk_undo(batch=batch, actor=request.user)
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


def _trajectory_context(request, trajectory: Trajectory, **extra) -> dict:
    verdict, failed_verdicts, older_verdicts = verdicts_split(list(trajectory.verdicts.all()))
    cited = set(verdict.cited_messages or []) if verdict else set()
    filterset, qs, sort = _queue(request)
    previous_id, next_id, position = queue_neighbours(
        qs, trajectory.pk, sort, position_limit=QUEUE_COUNT_LIMIT, search=queue_search_entries(filterset, page_size=1)
    )
    holder = reservation_holder(trajectory, request.user)
    query = _filter_query(request)
    reviews = list(trajectory.reviews.all())
    standing = standing_review(reviews)
    page = message_page(request, trajectory.messages or [])
    page_query = _without(_without(request.GET, "page"), "full").urlencode()
    violations = list(trajectory.violations.all())
    context = {
        "t": trajectory,
        "page": page,
        "page_query": page_query,
        # The sidebar's links reach messages on any page; it lists the first SIDEBAR_ITEMS of each.
        "cited_links": [
            (i, message_href(page_query, i)) for i in sorted(i for i in cited if isinstance(i, int))[:SIDEBAR_ITEMS]
        ],
        "violations": [
            (v, message_href(page_query, v.message_index) if v.message_index is not None else "")
            for v in violations[:SIDEBAR_ITEMS]
        ],
        "more_violations": max(len(violations) - SIDEBAR_ITEMS, 0),
        "items": chat_items(
            trajectory, cited, start=max(page.start_index() - 1, 0), stop=page.end_index(), full=shown_in_full(request)
        ),
        "verdict": verdict,
        "verdict_stale": verdict is not None and verdict.trajectory_version < trajectory.text_version,
        "verdict_scores": sorted((verdict.scores or {}).items()) if verdict else [],
        "failed_verdicts": failed_verdicts,
        "older_verdicts": older_verdicts,
        "reviews": reviews,
        "undoable_id": standing.pk if standing else None,
        "holder": holder,
        "stream": request.GET.get("stream") == "1" and holder is None,
        "pending": trajectory.status in PENDING_STATUSES and trajectory.reviewable,
        "reservation_seconds": settings.SIMIA_RESERVATION_SECONDS,
        "query": query,
        "previous_id": previous_id,
        "next_id": next_id,
        "position": position,
        "position_capped": position is not None and position > QUEUE_COUNT_LIMIT,
        "count_limit": QUEUE_COUNT_LIMIT,
        "revisions": revision_history(trajectory),
        "tools_json": clipped(pretty_json(trajectory.tools), limit=TOOLS_CHARS),
        "last_review": _last_review(request),
        "draft": draft_for(trajectory, request.user),
        "duplicates": trajectory_duplicates(trajectory.pk),
    }
    context.update(extra)
    return context


@role_required("annotator")
def trajectory_page(request, pk: int):
    """Viewing never reserves: only the review stream (`stream=1`, reached through review_next) holds an item."""
    trajectory = get_object_or_404(trajectory_detail_queryset(), pk=pk)
    return render(request, "curation/trajectory.html", _trajectory_context(request, trajectory))


def _after_decision(request, pk: int) -> str:
    """Where a decision leads: in the stream, the next free item (claimed); otherwise the next item nobody else
    holds, to view."""
    query = _filter_query(request)
    _, qs, sort = _queue(request)
    if request.GET.get("stream") == "1":
        after = pk if queue_has(qs, pk) else None
        claimed = trajectory_claim_next(queue=qs, user=request.user, after_id=after, sort=sort)
        if claimed is not None:
            return _with_query(reverse("trajectory", args=[claimed.pk]), query, stream="1")
        messages.info(request, "That was the last free item with these filters.")
        return _with_query(reverse("review-queue"), query)
    next_id = next_free(queue=qs, user=request.user, after_id=pk, sort=sort)
    target = reverse("trajectory", args=[next_id]) if next_id else reverse("review-queue")
    return _with_query(target, query)


def _decided(request, review: Review) -> HttpResponse:
    label = dict(Decision.choices)[review.decision].lower()
    messages.success(request, f"Trajectory {review.trajectory_id}: {label}.")
    request.session["undo_review"] = review.pk
    target = _after_decision(request, review.trajectory_id)
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


# A refused write: the page says why, with this status (htmx swaps it too: see static/js/review.js).
CONFLICT = 409


@role_required("annotator")
@require_POST
def trajectory_decide(request, pk: int):
    trajectory = get_object_or_404(Trajectory, pk=pk)
    decision = request.POST.get("decision", "")
    if decision == Decision.FIX_ACCEPT:
        return redirect(_with_query(reverse("trajectory-edit", args=[pk]), request.GET.urlencode()))
    try:
        review = review_decide(
            trajectory=trajectory,
            reviewer=request.user,
            decision=decision,
            expected_version=_int(request.POST.get("version")) or -1,
            reason=request.POST.get("reason", ""),
        )
    except (StaleVersion, HeldByOther, ReviewError) as exc:
        trajectory = get_object_or_404(trajectory_detail_queryset(), pk=pk)
        refused = isinstance(exc, StaleVersion | HeldByOther)
        context = _trajectory_context(
            request,
            trajectory,
            conflict=exc if isinstance(exc, StaleVersion) else None,
            edit_error=None if isinstance(exc, StaleVersion) else str(exc),
            posted_reason=request.POST.get("reason", ""),
        )
        template = "curation/_decision.html" if request.htmx else "curation/trajectory.html"
        return render(request, template, context, status=CONFLICT if refused else 400)
    return _decided(request, review)


@role_required("annotator")
def trajectory_editor(request, pk: int):
    """The full-width editor: every message, tool-call names and arguments (checked against the tool's
    schema), messages added, removed and reordered; saving is fix and accept, or an edit that leaves the item
    undecided. Entering it holds the item (the page renews the hold, and lets it go when left); the annotator's
    unsaved work is kept as a draft as they type, and restored when they come back."""
    trajectory = get_object_or_404(trajectory_detail_queryset(), pk=pk)
    if too_large_to_edit(trajectory.messages or [], trajectory.tools or []):
        # Every message would be a form field in the page and again in the POST: refuse, and say why.
        context = {"t": trajectory, "edit_max_kib": EDIT_MAX_BYTES // 1024}
        return render(request, "curation/editor_too_large.html", context, status=413)
    trajectory_hold(trajectory=trajectory, user=request.user)
    context = {
        "t": trajectory,
        "query": _filter_query(request),
        "stream": request.GET.get("stream") == "1",
        "holder": reservation_holder(trajectory, request.user),
        "blocks": editor_blocks(trajectory.messages or []),
        "errors": {},
        "roles": ["system", "user", "assistant", "tool"],
        "tool_names": sorted(tool_schemas(trajectory.tools or [])),
        "blank": {"key": "__key__", "role": "assistant", "content": "", "tool_call_id": "", "calls": []},
        "blank_call": {"key": "__call__", "id": "", "name": "", "args": "{}"},
        "version": trajectory.version,
        "reservation_seconds": settings.SIMIA_RESERVATION_SECONDS,
    }
    if request.method == "POST":
        return _editor_save(request, trajectory, context)
    draft = draft_for(trajectory, request.user)
    if draft is not None:
        fields = MultiValueDict(draft.fields)
        context.update(
            draft=draft,
            draft_changes=changes_since(pk, draft.based_on_version),
            blocks=editor_blocks_posted(fields, {}),
            version=draft.based_on_version,
            posted_reason=fields.get("reason", ""),
        )
    return render(request, "curation/editor.html", context)


def _editor_save(request, trajectory: Trajectory, context: dict) -> HttpResponse:
    """Save and accept (the default), or save without deciding (`then=edit`); a refusal keeps every typed field."""
    edited, errors = editor_messages(request.POST, trajectory.messages or [], trajectory.tools or [])
    expected = _int(request.POST.get("version")) or -1
    reason = request.POST.get("reason", "")
    status = 200
    if not errors:
        try:
            if request.POST.get("then") == "edit":
                trajectory_edit(
                    trajectory=trajectory, editor=request.user, messages=edited, expected_version=expected, note=reason
                )
                if not context["stream"]:  # in the stream the review page keeps holding it; elsewhere the work is done
                    trajectory_release(trajectory_id=trajectory.pk, user=request.user)
                messages.success(
                    request, f"Trajectory {trajectory.pk}: saved as version {trajectory.version}, not decided."
                )
                return redirect(_with_query(reverse("trajectory", args=[trajectory.pk]), request.GET.urlencode()))
            review = review_decide(
                trajectory=trajectory,
                reviewer=request.user,
                decision=Decision.FIX_ACCEPT,
                expected_version=expected,
                reason=reason,
                messages=edited,
            )
            return _decided(request, review)
        except StaleVersion as exc:
            context["conflict"], status = exc, CONFLICT
            draft_save(
                trajectory=trajectory, author=request.user, based_on_version=expected, fields=_draft_fields(request)
            )
        except HeldByOther as exc:
            errors["messages"], status = str(exc), CONFLICT
        except FormatError as exc:
            errors[editor_error_field(request.POST, exc.field)] = exc.message
        except ReviewError as exc:
            errors["messages"] = str(exc)
    context.update(
        blocks=editor_blocks_posted(request.POST, errors),
        errors=errors,
        version=expected,
        posted_reason=reason,
    )
    return render(request, "curation/editor.html", context, status=status)


@role_required("annotator")
@require_POST
def trajectory_draft(request, pk: int):
    """Keep the editor's form as typed (the page posts it a moment after each change), or discard it."""
    trajectory = get_object_or_404(Trajectory.objects.only("pk", "version"), pk=pk)
    if request.POST.get("action") == "discard":
        draft_discard(trajectory_id=pk, author=request.user)
        messages.info(request, "Draft discarded: the editor shows the current version.")
        return redirect(_with_query(reverse("trajectory-edit", args=[pk]), request.GET.urlencode()))
    based_on = _int(request.POST.get("version")) or trajectory.version
    try:
        draft = draft_save(
            trajectory=trajectory, author=request.user, based_on_version=based_on, fields=_draft_fields(request)
        )
    except ReviewError as exc:
        return JsonResponse({"saved": False, "error": str(exc)}, status=413)
    return JsonResponse({"saved": True, "at": draft.updated_at.isoformat(), "version": based_on})


# Form fields a draft does not keep: the token, and what the page sets itself.
DRAFT_SKIPPED = ("csrfmiddlewaretoken", "version", "then", "action")


def _draft_fields(request) -> dict[str, list[str]]:
    return {name: values for name, values in request.POST.lists() if name not in DRAFT_SKIPPED}


@role_required("annotator")
@require_POST
def trajectory_check_call(request, pk: int):
    """The editor's inline check of one tool call, as the annotator types."""
    trajectory = get_object_or_404(Trajectory.objects.only("tools"), pk=pk)
    return render(request, "curation/_call_errors.html", {"errors": tool_call_check(request.POST, trajectory.tools)})


@role_required("annotator")
@require_POST
def trajectory_revert_view(request, pk: int):
    trajectory = get_object_or_404(Trajectory, pk=pk)
    to_version = _int(request.POST.get("to_version")) or 0
    try:
        trajectory_revert(
            trajectory=trajectory,
            to_version=to_version,
            expected_version=_int(request.POST.get("version")) or -1,
            actor=request.user,
        )
        messages.success(
            request,
            f"Trajectory {pk}: version {to_version}'s text is now version {trajectory.version}; undecided again.",
        )
    except (StaleVersion, HeldByOther, ReviewError, FormatError) as exc:
        messages.error(request, f"Not reverted: {exc}")
    return redirect(_with_query(reverse("trajectory", args=[pk]), _filter_query(request)))


@role_required("curator")
@require_POST
def trajectory_judge_again_view(request, pk: int):
    """Queue the judge on the current version (an LLM call: curators decide when it is worth it)."""
    trajectory = get_object_or_404(Trajectory.objects.only("pk", "version"), pk=pk)
    job = trajectory_judge_again(trajectory=trajectory, actor=request.user)
    messages.success(request, f"Judging version {trajectory.version} again: job {job.pk}.")
    return redirect(_with_query(reverse("trajectory", args=[pk]), _filter_query(request)))


@role_required("annotator")
@require_POST
def review_undo_view(request, pk: int):
    """Undo keeps the annotator in the stream, on the item they took the decision back from (they hold it)."""
    review = get_object_or_404(Review, pk=pk)
    query = _filter_query(request)
    try:
        review_undo(review=review, actor=request.user)
    except (StaleVersion, HeldByOther, ReviewError) as exc:
        messages.error(request, f"Not undone: {exc}")
        return redirect(_with_query(reverse("trajectory", args=[review.trajectory_id]), query))
    messages.success(request, f"Undone: trajectory {review.trajectory_id} waits for your decision again.")
    return redirect(_with_query(reverse("trajectory", args=[review.trajectory_id]), query, stream="1"))


@role_required("annotator")
def agreement_page(request):
    profiles = judge_profiles()
    form = AgreementFilterForm(request.GET or None, profiles=profiles)
    data = form.cleaned_data if form.is_valid() else {}
    domain = data["domain"] if data.get("domain") else None
    slice_filters: dict[str, Any] = {
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
        name: _with_query(reverse("review-queue"), "", **queue_filters, verdict=verdict, status=status)
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
