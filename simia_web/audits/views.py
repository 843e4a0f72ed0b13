"""Pages of audits: the list and the form that creates one, an audit's figures, its stream of items (the review
queue's keyboard flow, holds and version checks, with the judge hidden until an item is decided when the audit is
blind), and accepting the rest on its evidence."""

from urllib.parse import urlencode

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST
from django_htmx.http import HttpResponseClientRedirect

from simia_web.accounts.models import owner_workspace_id
from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.catalog.selectors import domain_names
from simia_web.core.errors import HeldByOther, ValidationFailed
from simia_web.curation.models import Decision, Review, Trajectory
from simia_web.curation.selectors.review_page import ReviewNav, review_context
from simia_web.curation.selectors.trajectory import trajectory_detail_queryset
from simia_web.curation.services import ReviewError, review_undo, trajectory_release
from simia_web.curation.versions import StaleVersion
from simia_web.curation.views.common import decision_posted, int_or_none, last_review

from .forms import AuditForm, CeilingForm
from .models import Audit, AuditItem
from .plot import interval_plot
from .selectors import (
    EDITED_SHOWN,
    HALF_WIDTH,
    acceptances,
    accepted_on_evidence,
    audit_estimate,
    audit_in,
    audit_neighbours,
    audits_list,
    item_decision,
)
from .services import audit_accept_rest, audit_blind_set, audit_claim_next, audit_create

PAGE_SIZE = 50


def _audit(request, pk: int) -> Audit:
    """The audit `pk` of the current workspace; another workspace's is not found."""
    audit = audit_in(workspace_ids=page_workspace_ids(request.user), pk=pk)
    if audit is None:
        raise Http404("No such audit in this workspace.")
    return audit


@role_required("annotator")
def audit_list(request):
    """Every audit, newest first; curators and admins create one here."""
    curator = request.user.has_role("curator")
    form = (
        AuditForm(request.POST or None, domains=domain_names(workspace_ids=page_workspace_ids(request.user)))
        if curator
        else None
    )
    if request.method == "POST":
        if form is None:
            raise PermissionDenied("Creating an audit needs the curator role.")
        if form.is_valid():
            data = form.cleaned_data
            try:
                audit = audit_create(
                    filters=form.filters(),
                    sample_size=data["sample_size"],
                    strategy=data["strategy"],
                    seed=data["seed"],
                    blind=data["blind"],
                    actor=request.user,
                    workspace_id=request.user.current_workspace_id,
                )
            except ValidationFailed as exc:
                form.add_error(None, f"{exc.field.replace('_', ' ')}: {exc.detail}")
            else:
                messages.success(
                    request, f"Audit {audit.pk}: {audit.sample_size} of {audit.population} trajectories drawn."
                )
                return redirect("audit-detail", pk=audit.pk)
    page = Paginator(audits_list(workspace_ids=page_workspace_ids(request.user)), PAGE_SIZE).get_page(
        request.GET.get("page")
    )
    status = 400 if form is not None and form.errors else 200
    return render(request, "audits/list.html", {"page": page, "form": form, "query": ""}, status=status)


@role_required("annotator")
def audit_detail(request, pk: int):
    audit = _audit(request, pk)
    figures = audit_estimate(audit, trace=True)
    edited = figures.edited
    context = {
        "audit": audit,
        "figures": figures,
        "plot": interval_plot(figures.trace, figures.judge_only),
        "per_criterion": sorted(figures.per_criterion.items()),
        "edited": edited[:EDITED_SHOWN],
        "more_edited": max(len(edited) - EDITED_SHOWN, 0),
        "undecided": audit.sample_size - figures.counted,
        "half_width_points": f"{100 * HALF_WIDTH:g}",
        "acceptances": acceptances(audit)[:10],
        "accepted_count": accepted_on_evidence(audit.pk).count(),
        "ceiling_form": CeilingForm() if request.user.has_role("curator") else None,
        "judge_failed_share": audit.judge_failed / audit.population,
    }
    return render(request, "audits/detail.html", context)


def _item_url(audit_id: int, trajectory_id: int, *, stream: bool = False) -> str:
    url = reverse("audit-item", args=[audit_id, trajectory_id])
    return f"{url}?stream=1" if stream else url


@role_required("annotator")
@require_POST
def audit_next(request, pk: int):
    """The audit's stream: claim the next item in the sample's order that no decision counts for and nobody else
    holds (after `after`, the position skipped, when skipping) and open it."""
    audit = _audit(request, pk)
    claimed = audit_claim_next(audit=audit, user=request.user, after_position=int_or_none(request.POST.get("after")))
    if claimed is None:
        messages.info(request, "Nothing left to decide in this audit: every item is decided or held by someone.")
        target = reverse("audit-detail", args=[pk])
    else:
        target = _item_url(pk, claimed.pk, stream=True)
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


def _item_context(request, audit: Audit, item: AuditItem, trajectory: Trajectory, **extra) -> dict:
    """The review keys of curation's trajectory page (with the judge hidden until a decision counts for the item
    when the audit is blind, so it does not anchor one), with the audit's own: its decision, neighbours and links."""
    decision = item_decision(audit, trajectory.pk)
    context = review_context(request, trajectory, revealed=not audit.blind or decision is not None)
    previous_id, next_id = audit_neighbours(audit, item.position)
    item_url = _item_url(audit.pk, trajectory.pk)
    undoable_id, last = context["undoable_id"], last_review(request)
    query = request.GET.urlencode()
    next_free = reverse("audit-next", args=[audit.pk])
    context.update(
        {
            "audit": audit,
            "item": item,
            "decision": decision,
            "nav": ReviewNav(
                back_url=reverse("audit-detail", args=[audit.pk]),
                back_label="Audit",
                previous_url=_item_url(audit.pk, previous_id) if previous_id else None,
                next_url=_item_url(audit.pk, next_id) if next_id else None,
                skip_url=next_free,
                skip_after=item.position,
                holding="Auditing",
                release_url=reverse("audit-item-release", args=[audit.pk, trajectory.pk]),
                claim_url=next_free,
                claim_label="Decide the audit's items from the next free one",
                claimable=decision is None,
            ),
            "edited": trajectory.text_version != item.text_version,
            "previous_id": previous_id,
            "next_id": next_id,
            "last_review": last,
            "last_review_undo_url": reverse("audit-undo", args=[audit.pk, last.pk]) if last else None,
            "undo_url": reverse("audit-undo", args=[audit.pk, undoable_id]) if undoable_id else None,
            "decide_url": reverse("audit-item-decide", args=[audit.pk, trajectory.pk]) + (f"?{query}" if query else ""),
            "reload_url": item_url + (f"?{query}" if query else ""),
            # The editor returns here after a fix is saved.
            "edit_url": f"{reverse('trajectory-edit', args=[trajectory.pk])}?{urlencode({'next': item_url})}",
            "decision_notes": "audits/_decision_notes.html",
        }
    )
    context.update(extra)
    return context


def _item(request, pk: int, trajectory_id: int) -> tuple[Audit, AuditItem]:
    audit = _audit(request, pk)
    return audit, get_object_or_404(AuditItem, audit_id=audit.pk, trajectory_id=trajectory_id)


@role_required("annotator")
def audit_item(request, pk: int, trajectory_id: int):
    """One sampled item. Viewing never holds it: the stream (`stream=1`, reached through audit_next) does."""
    audit, item = _item(request, pk, trajectory_id)
    trajectory = get_object_or_404(
        trajectory_detail_queryset(workspace_ids=[owner_workspace_id(audit)]), pk=trajectory_id
    )
    return render(request, "audits/item.html", _item_context(request, audit, item, trajectory))


@role_required("annotator")
@require_POST
def audit_item_decide(request, pk: int, trajectory_id: int):
    """Accept or reject the version read, as on the review page (the same service); fix and accept opens the
    editor. In the stream the next item is claimed."""
    audit, item = _item(request, pk, trajectory_id)
    decision = request.POST.get("decision", "")
    stream = request.GET.get("stream") == "1"
    if decision == Decision.FIX_ACCEPT:
        next_url = urlencode({"next": _item_url(pk, trajectory_id)})
        return redirect(f"{reverse('trajectory-edit', args=[trajectory_id])}?{next_url}")
    review = decision_posted(
        request,
        trajectory_id,
        page=lambda trajectory, refusal: _item_context(request, audit, item, trajectory, **refusal),
        template="audits/item.html",
    )
    if isinstance(review, HttpResponse):
        return review
    label = dict(Decision.choices)[review.decision].lower()
    messages.success(request, f"Trajectory {trajectory_id}: {label} (counts for audit {audit.pk}).")
    request.session["undo_review"] = review.pk  # the next page's toast offers to undo it (curation's key)
    target = _item_url(pk, trajectory_id)
    if stream:
        claimed = audit_claim_next(audit=audit, user=request.user, after_position=item.position)
        if claimed is None:
            messages.info(request, "That was the last free item of this audit.")
            target = reverse("audit-detail", args=[pk])
        else:
            target = _item_url(pk, claimed.pk, stream=True)
    return HttpResponseClientRedirect(target) if request.htmx else redirect(target)


@role_required("annotator")
@require_POST
def audit_item_release(request, pk: int, trajectory_id: int):
    """Let go of the item (the Release button): back to the audit's page."""
    _item(request, pk, trajectory_id)
    trajectory_release(trajectory_id=trajectory_id, user=request.user)
    messages.info(request, f"Trajectory {trajectory_id} released.")
    return redirect("audit-detail", pk=pk)


@role_required("annotator")
@require_POST
def audit_undo(request, pk: int, review_id: int):
    """Take back a decision (the toast's Undo): the person holds the item again, in the audit's stream."""
    audit = _audit(request, pk)
    review = get_object_or_404(Review, pk=review_id, trajectory__audit_items__audit=audit)
    try:
        review_undo(review=review, actor=request.user)
    except (StaleVersion, HeldByOther, ReviewError) as exc:
        messages.error(request, f"Not undone: {exc}")
        return redirect(_item_url(pk, review.trajectory_id))
    messages.success(request, f"Undone: trajectory {review.trajectory_id} waits for your decision again.")
    return redirect(_item_url(pk, review.trajectory_id, stream=True))


@role_required("curator")
@require_POST
def audit_accept_rest_view(request, pk: int):
    audit = _audit(request, pk)
    form = CeilingForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Not accepted: give the ceiling as a percentage between 0 and 100.")
        return redirect("audit-detail", pk=pk)
    try:
        acceptance = audit_accept_rest(audit=audit, max_error_rate=form.share(), actor=request.user)
    except ValidationFailed as exc:
        messages.error(request, f"Not accepted. {exc.detail}")
        return redirect("audit-detail", pk=pk)
    if acceptance.job_id:
        messages.success(request, f"Accepting the rest of audit {pk} on its evidence runs as job {acceptance.job_id}.")
        return redirect("job-detail", pk=acceptance.job_id)
    messages.success(
        request,
        f"{acceptance.accepted} trajector{'y' if acceptance.accepted == 1 else 'ies'} accepted on the evidence of "
        f"audit {pk} (upper bound {acceptance.high:.1%}, ceiling {acceptance.max_error_rate:.1%}).",
    )
    return redirect("audit-detail", pk=pk)


@role_required("curator")
@require_POST
def audit_blind(request, pk: int):
    audit = _audit(request, pk)
    blind = request.POST.get("blind") == "1"
    audit_blind_set(audit=audit, blind=blind, actor=request.user)
    messages.success(
        request,
        f"Audit {pk} is blind: the judge stays hidden until an item is decided."
        if blind
        else f"Audit {pk} shows the judge on every item.",
    )
    return redirect("audit-detail", pk=pk)
