"""Reads for exports: which trajectories a snapshot covers, and snapshots with their job."""

from django.core.exceptions import ValidationError
from django.db.models import JSONField, OuterRef, Subquery
from django.db.models.functions import JSONObject

from simia_web.curation.filters import TrajectoryFilter
from simia_web.curation.models import STANDING, JudgeVerdict, Review, Trajectory, TrajectoryStatus

from .models import Snapshot

DEFAULT_STATUS = TrajectoryStatus.ACCEPTED


def export_filters_clean(filters: dict | None) -> dict:
    """Filters as stored on a snapshot: known names only, string values, status defaulting to accepted."""
    filters = dict(filters or {})
    unknown = sorted(set(filters) - set(TrajectoryFilter.base_filters))
    if unknown:
        allowed = ", ".join(sorted(TrajectoryFilter.base_filters))
        raise ValidationError({"filters": f"unknown filter(s) {', '.join(unknown)}; use {allowed}"})
    cleaned = {}
    for name, value in filters.items():
        if value is None or value == "":
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        cleaned[name] = str(value)
    cleaned.setdefault("status", DEFAULT_STATUS)
    filterset = TrajectoryFilter(data=cleaned, queryset=Trajectory.objects.all())
    if not filterset.is_valid():
        raise ValidationError({f"filters.{k}": [str(e) for e in v] for k, v in filterset.errors.items()})
    return cleaned


def export_queryset(filters: dict):
    """The trajectories a snapshot with these (cleaned) filters contains."""
    filterset = TrajectoryFilter(data=filters, queryset=Trajectory.objects.all())
    if not filterset.is_valid():
        raise ValidationError(filterset.errors)
    return filterset.qs


def export_rows(queryset):
    """The trajectories with what a manifest line names beside each record: `decision`, the human decision that
    stands (id, decision, by, at, the version it was made on and the version it made), and `verdict`, the judge's
    latest verdict on the newest version it judged (id, passed, score, version). One index lookup each per row."""
    decision = (
        Review.objects.filter(STANDING, trajectory=OuterRef("pk"))
        .order_by("-id")
        .values(
            json=JSONObject(
                id="id",
                decision="decision",
                by="reviewer__username",
                at="created_at",
                made_on_version="based_on_version",
                version="trajectory_version",
            )
        )[:1]
    )
    verdict = (
        JudgeVerdict.objects.filter(trajectory=OuterRef("pk"), error="")
        .order_by("-trajectory_version", "-id")
        .values(json=JSONObject(id="id", passed="passed", score="score", version="trajectory_version"))[:1]
    )
    return queryset.annotate(
        decision=Subquery(decision, output_field=JSONField()), verdict=Subquery(verdict, output_field=JSONField())
    )


def snapshot_list():
    return Snapshot.objects.select_related("job", "created_by")
