"""The full-width editor: fix and accept, or save without deciding; drafts kept as the annotator types; the
inline check of a tool call."""

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.datastructures import MultiValueDict
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.catalog.guidelines import guidelines_in_force
from simia_web.core.clipping import EDIT_MAX_BYTES, too_large_to_edit
from simia_web.core.dates import shown
from simia_web.core.errors import HeldByOther
from simia_web.curation.forms import (
    editor_blocks,
    editor_blocks_posted,
    editor_error_field,
    editor_messages,
    tool_call_check,
)
from simia_web.curation.models import Decision, Trajectory
from simia_web.curation.selectors.queue import (
    filter_query,
)
from simia_web.curation.selectors.trajectory import draft_for, reservation_holder, trajectory_detail_queryset
from simia_web.curation.services import (
    ReviewError,
    draft_discard,
    draft_save,
    review_decide,
    trajectory_edit,
    trajectory_hold,
    trajectory_release,
)
from simia_web.curation.versions import StaleVersion, changes_since
from simia_web.formats import FormatError
from simia_web.formats.conversation import tool_schemas

from .common import CONFLICT, int_or_none, page_trajectory, safe_next, with_query
from .trajectory import decided


@role_required("annotator")
def trajectory_editor(request, pk: int):
    """The full-width editor: every message, tool-call names and arguments (checked against the tool's
    schema), messages added, removed and reordered; saving is fix and accept, or an edit that leaves the item
    undecided. Entering it holds the item (the page renews the hold, and lets it go when left); the annotator's
    unsaved work is kept as a draft as they type, and restored when they come back."""
    trajectory = get_object_or_404(trajectory_detail_queryset(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    if too_large_to_edit(trajectory.messages or [], trajectory.tools or []):
        # Every message would be a form field in the page and again in the POST: refuse, and say why.
        context = {"t": trajectory, "edit_max_kib": EDIT_MAX_BYTES // 1024}
        return render(request, "curation/editor_too_large.html", context, status=413)
    trajectory_hold(trajectory=trajectory, user=request.user)
    context = {
        "t": trajectory,
        "query": filter_query(request.GET),
        "stream": request.GET.get("stream") == "1",
        # A page that sent the annotator here (an audit's item) asks to be returned to, when it is on this site.
        "back_url": safe_next(request, request.GET.get("next"))
        or with_query(reverse("trajectory", args=[trajectory.pk]), request.GET.urlencode()),
        "next": safe_next(request, request.GET.get("next")),
        "holder": reservation_holder(trajectory, request.user),
        "guidelines": guidelines_in_force(domain_id=trajectory.domain_id),
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
    expected = int_or_none(request.POST.get("version")) or -1
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
                return redirect(context["back_url"])
            review = review_decide(
                trajectory=trajectory,
                reviewer=request.user,
                decision=Decision.FIX_ACCEPT,
                expected_version=expected,
                reason=reason,
                messages=edited,
            )
            return decided(request, review, context["next"])
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
    trajectory = page_trajectory(request, pk, "pk", "version")
    if request.POST.get("action") == "discard":
        draft_discard(trajectory_id=pk, author=request.user)
        messages.info(request, "Draft discarded: the editor shows the current version.")
        return redirect(with_query(reverse("trajectory-edit", args=[pk]), request.GET.urlencode()))
    based_on = int_or_none(request.POST.get("version")) or trajectory.version
    try:
        draft = draft_save(
            trajectory=trajectory, author=request.user, based_on_version=based_on, fields=_draft_fields(request)
        )
    except ReviewError as exc:
        return JsonResponse({"saved": False, "error": str(exc)}, status=413)
    at = draft.updated_at
    return JsonResponse({"saved": True, "at": at.isoformat(), "shown": shown(at, "seconds"), "version": based_on})


# Form fields a draft does not keep: the token, and what the page sets itself.
DRAFT_SKIPPED = ("csrfmiddlewaretoken", "version", "then", "action")


def _draft_fields(request) -> dict[str, list[str]]:
    return {name: values for name, values in request.POST.lists() if name not in DRAFT_SKIPPED}


@role_required("annotator")
@require_POST
def trajectory_check_call(request, pk: int):
    """The editor's inline check of one tool call, as the annotator types."""
    trajectory = page_trajectory(request, pk, "tools")
    return render(request, "curation/_call_errors.html", {"errors": tool_call_check(request.POST, trajectory.tools)})
