"""Reads for exports: which trajectories a snapshot covers, and snapshots with their job."""

import re
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db.models import JSONField, OuterRef, QuerySet, Subquery
from django.db.models.functions import JSONObject

from simia_web.core.errors import ApplicationError, Conflict, NotFound
from simia_web.curation.duplicates import KEEP_LABELS, KEEP_ORDERS, near_duplicates_to_drop, not_indexed
from simia_web.curation.filters import TrajectoryFilter
from simia_web.curation.models import STANDING, JudgeVerdict, Review, Trajectory, TrajectoryStatus

from .filters import SnapshotFilter
from .models import FileKind, Snapshot

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


def export_deduplicated(queryset, keep: str):
    """The queryset less the near-duplicates an export keeping one per cluster leaves out (`keep`: which one, see
    curation.duplicates.KEEP_ORDERS), and what the report says about it: how many were removed, and how many of
    the matching trajectories the near-duplicate index does not hold (never compared)."""
    drop = near_duplicates_to_drop(queryset, keep)
    about = {
        "keep": KEEP_LABELS[keep],
        "removed": drop.count(),
        "not_indexed": not_indexed(queryset).count(),
    }
    return queryset.exclude(pk__in=drop), about


def export_rows(queryset):
    """The trajectories with what a manifest line names beside each record: `decision`, the human decision that
    stands (id, decision, by, at, the version it was made on, the version it made, whether it was part of a bulk
    action), and `verdict`, the judge's latest verdict on the newest version it judged (id, passed, score, version,
    its per-criterion scores, model and LLM call, for the dataset card). One index lookup each per row."""
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
                bulk="bulk",
            )
        )[:1]
    )
    verdict = (
        JudgeVerdict.objects.filter(trajectory=OuterRef("pk"), error="")
        .order_by("-trajectory_version", "-id")
        .values(
            json=JSONObject(
                id="id",
                passed="passed",
                score="score",
                version="trajectory_version",
                scores="scores",
                model="model",
                llm_call="llm_call_id",
            )
        )[:1]
    )
    return queryset.annotate(
        decision=Subquery(decision, output_field=JSONField()), verdict=Subquery(verdict, output_field=JSONField())
    )


def export_match_count(filters: dict) -> int | None:
    """How many trajectories a snapshot with these filters would hold now; None while a filter is wrong (building
    one refuses it, naming it)."""
    filterset = TrajectoryFilter(data=filters, queryset=Trajectory.objects.all())
    return filterset.qs.count() if filterset.is_valid() else None


def snapshots() -> QuerySet[Snapshot]:
    """Snapshots with their building job and author, as every snapshot row shows them."""
    return Snapshot.objects.select_related("job", "created_by")


def snapshot_list(*, filters: Mapping) -> QuerySet[Snapshot]:
    """Snapshots matching `filters` (SnapshotFilter's parameters), newest first."""
    return SnapshotFilter(filters, queryset=snapshots()).qs.order_by("-id")


def snapshot_download_path(snapshot: Snapshot, entry: dict) -> str:
    """Where one of the snapshot's files downloads: the only data file at the bare URL, the only file of another
    kind at `?file=KIND`, any file at `?name=NAME` (Parquet shards, the card's plots)."""
    path = f"/api/v1/snapshots/{snapshot.pk}/download/"
    if sum(1 for other in snapshot.files if other["kind"] == entry["kind"]) > 1:
        return f"{path}?name={quote(entry['name'])}"
    return path if entry["kind"] == FileKind.DATA else f"{path}?file={entry['kind']}"


def snapshot_file(snapshot: Snapshot, *, name: str | None, kind: str) -> tuple[dict, Path]:
    """The `files` entry a download asks for and where it is: by its `name` (`README.md`,
    `data/train-00000-of-00002.parquet`), else the only file of its `kind`. Only the snapshot's own files are
    ever served: a name it does not list is NotFound, like a file that is gone. A snapshot not built yet is a
    Conflict; a kind that is none, or has several files, is refused (name one)."""
    if name is None and kind not in FileKind.values:
        raise ApplicationError(f"file: choose one of {', '.join(FileKind.values)}")
    if not snapshot.is_built:
        raise Conflict(f"Snapshot {snapshot.pk} is not built ({snapshot.job.status}).")
    if name is None:
        entries = [entry for entry in snapshot.files if entry["kind"] == kind]
        if len(entries) > 1:
            names = ", ".join(entry["name"] for entry in entries[:3])
            raise ApplicationError(f"Snapshot {snapshot.pk} has {len(entries)} {kind} files ({names}…): name one.")
        name = entries[0]["name"] if entries else None
    entry = next((entry for entry in snapshot.files if entry["name"] == name), None) if name is not None else None
    path = Path(settings.EXPORTS_DIR) / entry["path"] if entry else None
    if path is None or not path.is_file():
        raise NotFound(f"Snapshot {snapshot.pk} has no {name or kind} file.")
    return entry, path


OPTIONS = ("shard_rows", "shard_bytes", "push_to_hub", "hub_repo", "dedup")
SHARD_ROWS_MIN, SHARD_BYTES_MIN = 1, 1024 * 1024
HUB_REPO = re.compile(r"[A-Za-z0-9][\w.-]{0,95}/[A-Za-z0-9][\w.-]{0,95}")


def export_options_clean(options: dict | None) -> dict:
    """Snapshot options as stored: shard_rows and shard_bytes (whole numbers, for Parquet), push_to_hub (a boolean),
    hub_repo ("owner/name", else the SIMIA_HF_DATASET_REPO setting) and dedup (keep one trajectory per near-duplicate
    cluster: `accepted_first` or `highest_score`). Unknown names are refused."""
    options = dict(options or {})
    errors, cleaned = {}, {}
    unknown = sorted(set(options) - set(OPTIONS))
    if unknown:
        errors["options"] = f"unknown option(s) {', '.join(unknown)}; use {', '.join(OPTIONS)}"
    for name, least in (("shard_rows", SHARD_ROWS_MIN), ("shard_bytes", SHARD_BYTES_MIN)):
        value = options.get(name)
        if value in (None, ""):
            continue
        if isinstance(value, bool) or not str(value).isdigit() or int(value) < least:
            errors[f"options.{name}"] = f"must be a whole number of at least {least}"
        else:
            cleaned[name] = int(value)
    push = options.get("push_to_hub")
    if push not in (None, ""):
        if push not in (True, False, "true", "false"):
            errors["options.push_to_hub"] = "must be true or false"
        elif push in (True, "true"):
            cleaned["push_to_hub"] = True
    repo = options.get("hub_repo")
    if repo not in (None, ""):
        if not isinstance(repo, str) or not HUB_REPO.fullmatch(repo):
            errors["options.hub_repo"] = 'must be a Hugging Face repo id, "owner/name"'
        else:
            cleaned["hub_repo"] = repo
    dedup = options.get("dedup")
    if dedup not in (None, ""):
        if dedup not in KEEP_ORDERS:
            errors["options.dedup"] = f"must be one of {', '.join(KEEP_ORDERS)}"
        else:
            cleaned["dedup"] = dedup
    if errors:
        raise ValidationError(errors)
    return cleaned
