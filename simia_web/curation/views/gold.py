"""Gold items and annotators' quality: a curator marks an item as gold (its expected answer, expected criterion
ratings and explanation) on its page; an annotator's quality page shows their accuracy on gold with its interval and
trend, how often reviewers overturn them and how often they agree with other annotators (curators read everyone's,
an annotator their own)."""

from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.core.errors import ValidationFailed
from simia_web.curation.selectors.people import workspace_people
from simia_web.curation.selectors.quality import TREND_BLOCK, annotator_quality
from simia_web.curation.services import gold_mark, gold_unmark
from simia_web.simulation.judge import CRITERIA

from .common import page_trajectory


@role_required("curator")
@require_POST
def trajectory_gold(request, pk: int):
    trajectory = page_trajectory(request, pk, "pk")
    try:
        if request.POST.get("action") == "remove":
            gold_unmark(trajectory=trajectory, actor=request.user)
            messages.success(request, f"Trajectory {pk} is no gold item any more.")
        else:
            gold_mark(
                trajectory=trajectory,
                expected_decision=request.POST.get("expected_decision", ""),
                expected_scores={c: request.POST.get(f"expected-{c}", "") for c in CRITERIA},
                explanation=request.POST.get("explanation", ""),
                actor=request.user,
            )
            messages.success(request, f"Trajectory {pk} is a gold item.")
    except ValidationFailed as exc:
        messages.error(request, f"Not saved: {exc}")
    return redirect(reverse("trajectory", args=[pk]))


@role_required("annotator")
def annotator_quality_page(request, pk: int):
    workspace_ids = page_workspace_ids(request.user)
    person = workspace_people(workspace_ids=workspace_ids).filter(pk=pk).first()
    if person is None:
        raise Http404("No such member of this workspace.")
    if person.pk != request.user.pk and not request.user.has_role("curator"):
        raise PermissionDenied("Curators read other people's quality.")
    quality = annotator_quality(annotator_id=person.pk, workspace_ids=workspace_ids)
    return render(request, "curation/quality.html", {"person": person, "quality": quality, "trend_block": TREND_BLOCK})
