"""Reads for exports: which trajectories a snapshot covers, and snapshots with their job."""

import json
import re
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote

import orjson
from django.conf import settings
from django.db import connections
from django.db.models import (
    BooleanField,
    DateTimeField,
    F,
    FloatField,
    Func,
    JSONField,
    Max,
    Min,
    QuerySet,
    TextField,
    Value,
)
from django.db.models.functions import Cast, JSONObject

from simia_web.accounts.scoping import scoped
from simia_web.audits.services import filter_values_clean
from simia_web.core.errors import ApplicationError, Conflict, NotFound, ValidationFailed
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
        raise ValidationFailed(f"unknown filter(s) {', '.join(unknown)}; use {allowed}", field="filters")
    cleaned = filter_values_clean(filters)
    cleaned.setdefault("status", DEFAULT_STATUS)
    filterset = TrajectoryFilter(data=cleaned, queryset=Trajectory.objects.all())
    if not filterset.is_valid():
        raise ValidationFailed.of({f"filters.{k}": v for k, v in filterset.errors.items()})
    return cleaned


def export_queryset(filters: dict, *, workspace_id: int):
    """The trajectories of the workspace a snapshot with these (cleaned) filters contains."""
    filterset = TrajectoryFilter(data=filters, queryset=scoped(Trajectory.objects.all(), [workspace_id]))
    if not filterset.is_valid():
        raise ValidationFailed.of(filterset.errors)
    return filterset.qs


def export_near_duplicates(queryset, keep: str) -> frozenset[int]:
    """The ids of the queryset's near-duplicates an export keeping one per cluster leaves out (`keep`: which one, see
    curation.duplicates.KEEP_ORDERS), the clusters taken over the whole queryset. Read once, when the export is
    planned: its ranges name those they span (exports.parts.IdRange.left_out)."""
    return frozenset(near_duplicates_to_drop(queryset, keep))


def export_near_duplicates_report(queryset, keep: str, removed: int) -> dict:
    """What the report says of the near-duplicates an export left out: which member of a cluster it kept, how many it
    removed, and how many of the matching trajectories the near-duplicate index does not hold (never compared)."""
    return {"keep": KEEP_LABELS[keep], "removed": removed, "not_indexed": not_indexed(queryset).count()}


class JsonValue(Func):
    """A column as a value of JSONObject. SQLite keeps JSON as text and booleans as 0 and 1, which its json_object
    would embed as a string and a number: there they are made JSON first. Elsewhere, the column as it is."""

    function = ""

    def __init__(self, name: str, output_field):
        super().__init__(F(name), output_field=output_field)

    def as_sqlite(self, compiler, connection, **extra_context):
        template = "JSON(%(expressions)s)"
        if isinstance(self.output_field, BooleanField):
            template = (
                "JSON(CASE WHEN %(expressions)s IS NULL THEN 'null' WHEN %(expressions)s THEN 'true' ELSE 'false' END)"
            )
        return super().as_sql(compiler, connection, template=template, **extra_context)


# What a manifest line names beside each record (and the dataset card counts): `decision`, the human decision that
# stands (id, decision, by, at, the version it was made on, the version it made, whether it was part of a bulk
# action), and `verdict`, the judge's latest verdict on the newest version it judged (id, passed, score, version,
# its per-criterion scores, model and LLM call). Built by the database as JSON (JSONB, whose numbers and dates are
# what the manifests have always held).
DECISION = JSONObject(
    id="id",
    decision="decision",
    by="reviewer__username",
    at="created_at",
    made_on_version="based_on_version",
    version="trajectory_version",
    bulk=JsonValue("bulk", BooleanField()),
)
VERDICT = JSONObject(
    id="id",
    passed=JsonValue("passed", BooleanField()),
    score="score",
    version="trajectory_version",
    scores=JsonValue("scores", JSONField()),
    model="model",
    llm_call="llm_call_id",
)
BESIDE = ("decision", "verdict")  # the names export_records gives them in each row


def _decisions(queryset, span: tuple[int, int]):
    """(trajectory id, decision JSON) of the trajectories, the one that stands first for each, in trajectory order;
    `span` is their lowest and highest id, which bounds the read of the decisions' trajectory index."""
    low, high = span
    reviews = Review.objects.filter(
        STANDING, trajectory_id__gte=low, trajectory_id__lte=high, trajectory__in=queryset.values("pk")
    ).order_by("trajectory_id", "-id")
    return reviews.values_list("trajectory_id", Cast(DECISION, TextField()))


def _verdicts(queryset, span: tuple[int, int]):
    """(trajectory id, verdict JSON) of the trajectories' verdicts that are not failed calls, the newest version's
    latest first for each, in trajectory order; `span` bounds the read as _decisions's."""
    low, high = span
    verdicts = JudgeVerdict.objects.filter(
        trajectory_id__gte=low, trajectory_id__lte=high, trajectory__in=queryset.values("pk"), error=""
    )
    verdicts = verdicts.order_by("trajectory_id", "-trajectory_version", "-id")
    return verdicts.values_list("trajectory_id", Cast(VERDICT, TextField()))


class _FirstPerTrajectory:
    """Reads (trajectory id, JSON text) pairs in trajectory order alongside the rows (a merge join): value_for(id)
    is the first pair's value for that trajectory, parsed, or None; the rows must ask in ascending id order."""

    def __init__(self, pairs):
        self.pairs = iter(pairs)
        self.current = next(self.pairs, None)

    def value_for(self, trajectory_id: int):
        while self.current is not None and self.current[0] < trajectory_id:
            self.current = next(self.pairs, None)
        if self.current is None or self.current[0] != trajectory_id:
            return None
        return stored_json(self.current[1])


class RowJson(Func):
    """Columns of a row as one JSON object, keys in the order given, as text (PostgreSQL's json_build_object): one
    value to send and parse per row instead of one per column."""

    function = "JSON_BUILD_OBJECT"
    template = "%(function)s(%(expressions)s)::text"
    output_field = TextField()

    def __init__(self, names):
        pairs = []
        for name in names:
            pairs += [Cast(Value(name), TextField()), F(name)]
        super().__init__(*pairs)


def _parsed_as_values(names) -> list:
    """(name, conversion) for the columns whose value in JSON is not what values() gives: dates come as ISO text,
    and a float with no fraction as an integer."""
    conversions: list[tuple[str, Callable[[Any], Any]]] = []
    for name in names:
        field = Trajectory._meta.get_field(name) if "__" not in name else None
        if isinstance(field, DateTimeField):
            conversions.append((name, datetime.fromisoformat))
        elif isinstance(field, FloatField):
            conversions.append((name, float))
    return conversions


CONVERSATION = ("messages", "tools")


def _trajectory_rows(queryset, names, chunk_size: int, conversation_text: bool = False) -> Iterator[dict]:
    """The trajectories as dicts of `names` (with "id"), in id order, from one server-side cursor (the caller holds
    the transaction it needs); with `conversation_text`, CONVERSATION among `names` as JSON text. On PostgreSQL the
    other columns of a row come as one JSON text, parsed by stored_json: parsing a value per column was most of the
    time an export spent reading."""
    ordered = queryset.order_by("pk")
    as_text = [name for name in CONVERSATION if name in names] if conversation_text else []
    texts = [Cast(name, TextField()) for name in as_text]
    names = [name for name in names if name not in as_text]
    if connections[queryset.db].vendor != "postgresql":
        keys = [*names, *as_text]
        for values in ordered.values_list(*names, *texts).iterator(chunk_size=chunk_size):
            yield dict(zip(keys, values, strict=True))
        return
    conversions = _parsed_as_values(names)
    for text, *conversation in ordered.values_list(RowJson(names), *texts).iterator(chunk_size=chunk_size):
        row = stored_json(text)
        for name, conversion in conversions:
            if row[name] is not None:
                row[name] = conversion(row[name])
        row.update(zip(as_text, conversation, strict=True))
        yield row


def export_records(queryset, fields, chunk_size: int, *, conversation_text: bool = False) -> Iterator[dict]:
    """The trajectories as dicts of `fields`, in id order, each with its `decision` and `verdict` (see DECISION and
    VERDICT) when `fields` names them; with `conversation_text`, `messages` and `tools` as the JSON text the database
    holds, unparsed, for a gate that decodes text (formats.openai.openai_record_from_text). Three ordered reads
    merged here, each a server-side cursor: the rows, the decisions and the verdicts, rather than a lookup of each per
    row. The decisions and verdicts are read between the rows' lowest and highest id: a range of an export
    (exports.parts) reads theirs from their trajectory index, not every decision's."""
    names = [name for name in fields if name not in BESIDE]
    beside = {}
    if any(name in BESIDE for name in fields):
        span = queryset.aggregate(low=Min("pk"), high=Max("pk"))
        if span["low"] is None:
            return
        beside = {
            name: _FirstPerTrajectory(read(queryset, (span["low"], span["high"])).iterator(chunk_size=chunk_size))
            for name, read in (("decision", _decisions), ("verdict", _verdicts))
            if name in fields
        }
    for row in _trajectory_rows(queryset, names, chunk_size, conversation_text):
        for name, values in beside.items():
            row[name] = values.value_for(row["id"])
        yield row


# A run of this many digits may be an integer beyond 64 bits, which orjson reads as a float (json.loads as an int).
LONG_NUMBER = b"0" * 19
DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")


def stored_json(text: str):
    """A JSON value as the database returned it, parsed as a JSONField parses it (json.loads), by orjson (a third
    of the time) wherever the two agree: a text with a run of 19 digits, or one orjson refuses (a lone surrogate,
    a number beyond a double's range), is parsed by json.loads."""
    data = text.encode()
    if LONG_NUMBER not in data.translate(DIGITS_AS_ZERO):
        try:
            return orjson.loads(data)
        except orjson.JSONDecodeError:
            pass
    return json.loads(text)


def export_match_count(filters: dict, *, workspace_ids: list[int]) -> int | None:
    """How many trajectories of the workspaces a snapshot with these filters would hold now; None while a filter is
    wrong (building one refuses it, naming it)."""
    filterset = TrajectoryFilter(data=filters, queryset=scoped(Trajectory.objects.all(), workspace_ids))
    return filterset.qs.count() if filterset.is_valid() else None


def snapshots(*, workspace_ids: list[int]) -> QuerySet[Snapshot]:
    """The workspaces' snapshots with their building job and author, as every snapshot row shows them."""
    return scoped(Snapshot.objects.select_related("job", "created_by"), workspace_ids)


def snapshot_list(*, filters: Mapping, workspace_ids: list[int]) -> QuerySet[Snapshot]:
    """The workspaces' snapshots matching `filters` (SnapshotFilter's parameters), newest first."""
    return SnapshotFilter(filters, queryset=snapshots(workspace_ids=workspace_ids)).qs.order_by("-id")


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
    if entry is None or path is None or not path.is_file():
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
    errors: dict[str, str] = {}
    cleaned: dict[str, Any] = {}
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
        raise ValidationFailed.of(errors)
    return cleaned
