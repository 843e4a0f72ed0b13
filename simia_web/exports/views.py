"""The exports pages: choose a format and filters, count what matches, queue a snapshot (and its publication to the
Hugging Face Hub), see past snapshots, and one snapshot's files, checksums, publication and the records it left
out."""

from django.conf import settings
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids
from simia_web.audits.selectors import audits_list
from simia_web.catalog.selectors import domain_names
from simia_web.core.errors import ApplicationError, ValidationFailed, fields_said
from simia_web.core.markdown import markdown_html
from simia_web.curation.duplicates import KEEP_LABELS
from simia_web.curation.filters import TrajectoryFilter
from simia_web.curation.models import Trajectory, TrajectoryStatus
from simia_web.jobs.models import ACTIVE_JOB_STATUSES

from .models import ExportFormat, FileKind
from .selectors import (
    DEFAULT_STATUS,
    export_match_count,
    snapshot_download_path,
    snapshot_file,
    snapshot_list,
    snapshots,
)
from .services import snapshot_create

# The queue's filters an export form offers (the names are TrajectoryFilter's).
FORM_FILTERS = ("domain", "status", "verdict", "min_score", "max_score", "job", "violation", "q")
# The form's two buttons post to the page: "count" only counts the matches, anything else builds a snapshot.
COUNT = "count"
REFUSALS_SHOWN = 50
SNAPSHOTS_PER_PAGE = 50
AUDITS_OFFERED = 50  # the latest audits a snapshot may be certified by, on the form (REST takes any)
# The statuses the form offers: each one, and every status at once.
STATUS_CHOICES = [*TrajectoryStatus.choices, ("all", "Any status")]


def _posted_filters(data) -> dict:
    return {name: data[name] for name in FORM_FILTERS if data.get(name, "").strip()}


@role_required("annotator")
def export_list(request):
    filters = _posted_filters(request.POST if request.method == "POST" else request.GET)
    filters.setdefault("status", DEFAULT_STATUS)
    error = None
    if request.method == "POST":
        if not request.user.has_role("curator"):
            raise PermissionDenied("Creating exports needs the curator role.")
        if request.POST.get("action") != COUNT:
            options = {"push_to_hub": True} if request.POST.get("push_to_hub") else {}
            if request.POST.get("dedup"):
                options["dedup"] = request.POST["dedup"]
            try:
                snapshot = snapshot_create(
                    format=request.POST.get("format", ""),
                    filters=filters,
                    options=options,
                    actor=request.user,
                    workspace_id=request.user.current_workspace_id,
                    **_certification_posted(request.POST),
                )
            except ValidationFailed as exc:
                error = fields_said(exc.errors, between=", ")
            except ApplicationError as exc:
                error = "; ".join(f"{k}: {' '.join(map(str, v))}" for k, v in exc.body().items())
            else:
                messages.success(request, f"Snapshot {snapshot.pk} is being built (job {snapshot.job_id}).")
                return redirect("export-list")
    workspace_ids = page_workspace_ids(request.user)
    matching = export_match_count(filters, workspace_ids=workspace_ids)
    # No count while a filter is wrong (an old link's unknown status, say): the page says which and why.
    filter_problems = ""
    if matching is None:
        filterset = TrajectoryFilter(data=filters, queryset=Trajectory.objects.none())
        if not filterset.is_valid():
            filter_problems = "; ".join(f"{name}: {' '.join(said)}" for name, said in filterset.errors.items())
    # The snapshot list has a filter of its own (`format`, as in the REST list) beside the new snapshot's filters.
    snapshots_listed = snapshot_list(filters=request.GET, workspace_ids=workspace_ids)
    listed = Paginator(snapshots_listed, SNAPSHOTS_PER_PAGE).get_page(request.GET.get("page"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "exports/list.html",
        {
            "formats": ExportFormat.choices,
            "chosen_format": request.POST.get("format", ExportFormat.OPENAI),
            "filters": filters,
            "matching": matching,
            "filter_problems": filter_problems,
            "domains": domain_names(workspace_ids=workspace_ids),
            "page": listed,
            "query": query.urlencode(),
            "listed_format": request.GET.get("format", ""),
            "building": any(s.job.status in ACTIVE_JOB_STATUSES for s in listed),
            "error": error,
            "hub_configured": bool(settings.HF_TOKEN and settings.HF_DATASET_REPO),
            "dedup_choices": KEEP_LABELS.items(),
            "chosen_dedup": request.POST.get("dedup", ""),
            "status_choices": STATUS_CHOICES,
            "audits": audits_list(workspace_ids=workspace_ids)[:AUDITS_OFFERED],
            "chosen_audit": request.POST.get("audit", ""),
            "chosen_ceiling": request.POST.get("max_error_rate", ""),
        },
        status=400 if error else 200,
    )


def _certification_posted(data) -> dict:
    """The audit and ceiling a snapshot is to be certified by, as the form posted them ({} for none)."""
    audit, ceiling = data.get("audit", "").strip(), data.get("max_error_rate", "").strip()
    if not audit and not ceiling:
        return {}
    try:
        return {"audit": int(audit) if audit else None, "max_error_rate": float(ceiling) if ceiling else None}
    except ValueError:
        raise ValidationFailed("give the ceiling as a share, such as 0.05", field="max_error_rate") from None


def _card_html(snapshot):
    """The snapshot's dataset card rendered (its front matter left out), or None when it has none to show."""
    if not snapshot.is_built:
        return None
    try:
        _entry, path = snapshot_file(snapshot, name=None, kind=FileKind.CARD)
    except ApplicationError:
        return None
    text = path.read_text(encoding="utf-8", errors="replace")
    for entry in snapshot.files:  # the card's plots, from where the page can fetch them
        if entry["kind"] == FileKind.IMAGE:
            text = text.replace(f"]({entry['name']})", f"]({snapshot_download_path(snapshot, entry)})")
    return markdown_html(text)


@role_required("annotator")
def export_detail(request, pk: int):
    snapshot = get_object_or_404(snapshots(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    return render(
        request,
        "exports/detail.html",
        {
            "snapshot": snapshot,
            "files": [{**entry, "download_url": snapshot_download_path(snapshot, entry)} for entry in snapshot.files],
            "reasons": sorted(snapshot.refusal_reasons.items(), key=lambda kv: -kv[1]),
            "refusals": snapshot.refusals[:REFUSALS_SHOWN],
            "building": snapshot.job.status in ACTIVE_JOB_STATUSES,
            "card_html": _card_html(snapshot),
        },
    )
