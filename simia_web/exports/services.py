"""Building dataset file sets (data, manifest, report, dataset card): one writer core shared by snapshot jobs and
the `export` command.

Checksums: the data's sha256 is the snapshot's `sha256` (a single data file's own; for Parquet shards, the sha256
of their `sha256sum` lines, see files.data_sha256); every file's own is in `files` (the download's
X-Checksum-SHA256); the report lists every other file's; each manifest line holds the sha256 of its record."""

import json
import os
import shutil
import uuid
from collections import Counter
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from simia_web.accounts.models import default_workspace_id, owner_workspace_id
from simia_web.audits.models import Audit
from simia_web.audits.selectors import accepted_on_evidence, audit_certificate
from simia_web.audits.services import audit_ceiling_check
from simia_web.core.errors import ApplicationError, ValidationFailed
from simia_web.core.services import audit_record
from simia_web.jobs.services import job_create

from .files import FileDigest, data_sha256, digest_of
from .hub import hub_push
from .models import ExportFormat, FileKind, Snapshot
from .parts import IdRange, Part, export_ranges, part_write, parts_merge
from .records import ExportStats, Lines, Manifest
from .selectors import (
    export_filters_clean,
    export_near_duplicates,
    export_near_duplicates_report,
    export_options_clean,
    export_queryset,
)
from .signals import snapshot_ready
from .writers import EXTENSIONS, SHARDED, WRITERS

EXPORT = "export"  # the job kind that builds a snapshot (registered in exports.job_kinds)


def _read_transaction():
    """PostgreSQL streams rows through a server-side cursor only inside a transaction (which also
    gives every pass of a writer the same data). SQLite reads in batches without one, and a
    transaction there would hold the write lock for the whole export."""
    return transaction.atomic() if connection.vendor == "postgresql" else nullcontext()


@dataclass
class ExportResult:
    """What an export wrote: its counts and its files (the data, the manifest, the card and its plots, the report),
    each with its size and sha256."""

    stats: ExportStats
    files: list[FileDigest]

    def file(self, kind: str) -> FileDigest:
        return next(f for f in self.files if f.kind == kind)

    @property
    def data_files(self) -> list[FileDigest]:
        return [f for f in self.files if f.kind == FileKind.DATA]

    @property
    def bytes(self) -> int:
        return sum(f.bytes for f in self.data_files)

    @property
    def sha256(self) -> str:
        return data_sha256(self.data_files)


def export_file_names(data_name: str) -> dict[str, str]:
    """The file set around a data file: `retail.zip` → `retail.manifest.jsonl` and `retail.report.json` (for
    Parquet, `data_name` names the folder and the shards go in its `data/`)."""
    stem = Path(data_name).stem
    return {
        FileKind.DATA: data_name,
        FileKind.MANIFEST: f"{stem}.manifest.jsonl",
        FileKind.REPORT: f"{stem}.report.json",
    }


@dataclass(frozen=True)
class ExportOptions:
    label: str = "simia"
    card: bool = True  # write the dataset card (README.md) and its plots
    shard_rows: int = 0  # Parquet shard limits; 0: the EXPORT_SHARD_* settings
    shard_bytes: int = 0
    dedup: str = ""  # keep one trajectory per near-duplicate cluster, chosen this way (curation.duplicates)


def _report(*, format: str, filters: dict, label: str, stats: ExportStats, files: list[FileDigest], about: dict, dedup):
    """The report file: what was asked for, what was written, what was left out and why (near-duplicates removed
    included, when the export deduplicates), and the sizes and sha256 of every other file (the snapshot row holds
    the report's own)."""
    return {
        **about,
        "format": format,
        "filters": filters,
        "dataset": label,
        "written_at": timezone.now().isoformat(),
        "records": stats.count,
        "repaired": stats.repaired_count,
        "left_out": stats.refused_count,
        "left_out_by_reason": dict(stats.refusal_reasons.most_common()),
        "left_out_examples": stats.refusals,
        "near_duplicates": dedup,
        "gate": "every record passed the strict normaliser (messages and tools) and the format's validator",
        "manifest": " ".join((Manifest.__doc__ or "").split("\n\n", 1)[1].split()),  # what its lines hold
        "data_sha256": data_sha256([f for f in files if f.kind == FileKind.DATA]),
        "files": [f.as_dict() for f in files],
    }


class CertifiedManifest(Manifest):
    """The manifest of a snapshot an audit certifies: each line also names the audit (`audit`) and says whether the
    record's decision rests on its evidence (`accepted_on_audit_evidence`: a decision "accept the rest" wrote);
    `on_evidence` counts those records."""

    def __init__(self, stream, *, audit: int, evidence: np.ndarray):
        super().__init__(stream)
        self.evidence, self.on_evidence = evidence, 0
        self.audit = str(audit).encode()
        self.lines = _SuffixedLines(stream, self)
        self.suffix = b"}"

    def add(self, row: dict, record: bytes) -> None:
        decision = (row["decision"] or {}).get("id")
        found = decision is not None and _holds(self.evidence, decision)
        self.on_evidence += found
        self.suffix = b',"audit":' + self.audit + b',"accepted_on_audit_evidence":' + (b"true}" if found else b"false}")
        super().add(row, record)


class _SuffixedLines(Lines):
    """A manifest's lines with its current suffix in place of each line's closing brace (a line is one JSON object)."""

    def __init__(self, stream, manifest: CertifiedManifest):
        super().__init__(stream)
        self.manifest = manifest

    def add(self, line: bytes) -> None:
        super().add(line[:-1] + self.manifest.suffix)


def _holds(sorted_ids: np.ndarray, value: int) -> bool:
    at = int(np.searchsorted(sorted_ids, value))
    return at < len(sorted_ids) and int(sorted_ids[at]) == value


def _manifest(stream, audit: int | None) -> Manifest:
    """The manifest writer: a certified one when an audit certifies the export."""
    if not audit:
        return Manifest(stream)
    ids = accepted_on_evidence(audit).order_by("id").values_list("id", flat=True)
    evidence = np.fromiter(ids.iterator(chunk_size=20_000), dtype=np.int64)
    return CertifiedManifest(stream, audit=audit, evidence=evidence)


def _ranges(queryset, dedup: str) -> list[IdRange]:
    """The ranges an export of `queryset` is written in, about EXPORT_RANGE_RECORDS records each; with `dedup`, each
    names the near-duplicates in it that the export leaves out, read once here for all of them."""
    leaving = export_near_duplicates(queryset, dedup) if dedup else frozenset()
    return export_ranges(queryset, settings.EXPORT_RANGE_RECORDS, leaving=leaving)


# Told how far the writing of a part has got: (records handled, records to handle), see parts.part_write.
ExportProgress = Callable[[int, int], None]


def _part_into(
    *,
    format: str,
    queryset,
    part: Part,
    options: ExportOptions,
    audit: int | None,
    progress: ExportProgress | None = None,
) -> dict:
    """Write one range's part (parts.part_write) into its folder, which is left empty on any failure."""
    try:
        with _read_transaction():
            return part_write(
                format=format,
                queryset=queryset,
                part=part,
                manifest_for=lambda stream: _manifest(stream, audit),
                label=options.label,
                shard_rows=options.shard_rows or settings.EXPORT_SHARD_ROWS,
                shard_bytes=options.shard_bytes or settings.EXPORT_SHARD_BYTES,
                progress=progress,
            )
    except BaseException:
        _emptied(part.folder)
        raise


def _emptied(folder: Path) -> None:
    for child in folder.iterdir():
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()


def _export_merged(
    *,
    format: str,
    filters: dict,
    workspace_id: int,
    parts: list[Part],
    folder: Path,
    names: dict[str, str],
    options: ExportOptions,
    about: dict,
    removed: int,
) -> ExportResult:
    """Merge the parts (in id order) into the file set in `folder` (a new, empty folder of the caller's): the data,
    the manifest, the dataset card (with options.card) and the report, synced to disk; on any failure (or
    interruption) empty the folder again. `removed`: the near-duplicates the ranges left out, with options.dedup."""
    try:
        stats, files, on_evidence = parts_merge(
            format=format, parts=parts, folder=folder, names=names, label=options.label
        )
        dedup = None
        if options.dedup:
            queryset = export_queryset(filters, workspace_id=workspace_id)
            dedup = export_near_duplicates_report(queryset, options.dedup, removed)
            reason = f"near-duplicate of a record kept ({dedup['keep']})"
            stats.facts.duplicates = Counter({reason: dedup["removed"]})
        if about.get("audit"):
            about["audit"]["records_accepted_on_evidence"] = on_evidence
        if options.card:
            # matplotlib and huggingface_hub load in the process that writes a card, not in every web process.
            from .card import CardInput, card_write

            card = CardInput(
                format=format,
                label=options.label,
                filters=filters,
                refused=stats.refused_count,
                refusal_reasons=stats.refusal_reasons,
                data_files=files[:-1],
                manifest=files[-1],
                about=about,
            )
            files += card_write(folder, stats.facts, card)
        report = _report(
            format=format, filters=filters, label=options.label, stats=stats, files=files, about=about, dedup=dedup
        )
        body = json.dumps(report, indent=2, ensure_ascii=False, default=str).encode()
        files.append(digest_of(folder, names[FileKind.REPORT], FileKind.REPORT, body))
    except BaseException:
        _emptied(folder)
        raise
    return ExportResult(stats=stats, files=files)


def export_write(
    *,
    format: str,
    filters: dict,
    path: Path,
    options: ExportOptions | None = None,
    workspace_id: int | None = None,
) -> ExportResult:
    """Write the export of the workspace's data (the `default` workspace's when None) to `path`, its manifest and
    report (and, with options.card, README.md and images/)
    beside it (see export_file_names), each through a temporary folder beside them and moved into place at the end.
    For Parquet `path` is a folder to create (its shards go in `data/`, the other files beside that)."""
    if format not in WRITERS:
        raise ValueError(f"Unknown format {format!r}; choose from {', '.join(WRITERS)}.")
    options = options or ExportOptions(card=False)
    path = Path(path)
    if format in SHARDED and path.exists() and (not path.is_dir() or any(path.iterdir())):
        raise ValueError(f"{path} exists and is not an empty folder: Parquet shards are written into a new folder.")
    path.parent.mkdir(parents=True, exist_ok=True)
    names = export_file_names(path.name)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    partial.mkdir()
    workspace_id = default_workspace_id() if workspace_id is None else workspace_id
    try:
        queryset = export_queryset(filters, workspace_id=workspace_id)
        ranges = _ranges(queryset, options.dedup)
        parts = []
        # The same parts a snapshot job's units write, one after another here.
        for index, bounds in enumerate(ranges):
            part = Part(partial / ".parts" / part_name(index))
            part.folder.mkdir(parents=True)
            _part_into(format=format, queryset=bounds.of(queryset), part=part, options=options, audit=None)
            parts.append(part)
        merged = partial / ".merged"
        merged.mkdir()
        result = _export_merged(
            format=format,
            filters=filters,
            workspace_id=workspace_id,
            parts=parts,
            folder=merged,
            names=names,
            options=options,
            about={},
            removed=sum(len(bounds.left_out) for bounds in ranges),
        )
        target = path if format in SHARDED else path.parent
        for written in result.files:
            (target / written.name).parent.mkdir(parents=True, exist_ok=True)
            os.replace(merged / written.name, target / written.name)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return result


def part_name(index: int) -> str:
    return f"part-{index:05d}"


def _certification(audit_id, max_error_rate, *, workspace_id: int) -> dict | None:
    """What a certified snapshot asks for ({"audit", "max_error_rate"}), checked: the audit exists and its upper
    bound is at or below the ceiling now (a 400 naming the field otherwise)."""
    if audit_id is None and max_error_rate is None:
        return None
    if audit_id is None:
        raise ValidationFailed("a ceiling needs the audit it holds (`audit`)", "audit")
    if max_error_rate is None:
        raise ValidationFailed("certifying by an audit needs a ceiling (`max_error_rate`)", "max_error_rate")
    audit = Audit.objects.filter(pk=audit_id, workspace_id=workspace_id).first()
    if audit is None:
        raise ValidationFailed(f"there is no audit {audit_id}", "audit")
    checked = audit_ceiling_check(audit=audit, max_error_rate=max_error_rate)
    return {"audit": audit.pk, "max_error_rate": checked["ceiling"]}


def snapshot_certificate(certification: dict) -> dict:
    """The audit block of a certified snapshot as it stands when built: the audit's figures (audit_certificate),
    the ceiling, and the sentence saying what the interval means. Refused (a ValidationFailed) when the upper bound
    has risen above the ceiling since the request."""
    audit = Audit.objects.get(pk=certification["audit"])
    checked = audit_ceiling_check(audit=audit, max_error_rate=certification["max_error_rate"])
    block = audit_certificate(audit=audit, estimate=checked["estimate"])
    interval = checked["estimate"].headline
    block["max_error_rate"] = checked["ceiling"]
    block["meaning"] = (
        f"If a person decided every one of the {audit.population} trajectories of audit {audit.pk}'s population as "
        f"they stood when it was frozen, the share they would reject (or accept only after a fix) would lie between "
        f"{interval.low:.1%} and {interval.high:.1%} with {interval.confidence:.0%} confidence, an estimate from "
        f"{block['audited']} decisions made by people on a random sample and the judge's scores over the rest."
    )
    return block


def snapshot_create(
    *,
    format: str,
    filters: dict | None,
    options: dict | None = None,
    actor=None,
    audit: int | None = None,
    max_error_rate: float | None = None,
    workspace_id: int | None = None,
) -> Snapshot:
    """Record the request and queue the job that builds it (and publishes it when options ask), over the workspace's
    trajectories (the `default` workspace's when None). With `audit` and `max_error_rate` the snapshot is certified
    by the audit (one of the workspace's): refused while its upper bound is above the ceiling, and its report, card
    and manifest carry the audit's block."""
    if format not in ExportFormat.values:
        raise ValidationFailed(f"choose from {', '.join(ExportFormat.values)}", field="format")
    cleaned = export_filters_clean(filters)
    chosen = export_options_clean(options)
    workspace_id = default_workspace_id() if workspace_id is None else workspace_id
    certification = _certification(audit, max_error_rate, workspace_id=workspace_id)
    if certification is not None:
        chosen["certify"] = certification
    actor = actor if getattr(actor, "pk", None) else None
    with transaction.atomic():
        params = {"format": format, "filters": cleaned, "options": chosen}
        job = job_create(kind=EXPORT, params=params, actor=actor, workspace_id=workspace_id)
        snapshot = Snapshot.objects.create(format=format, filters=cleaned, options=chosen, job=job, created_by=actor)
        audit_record(
            actor=actor, action="snapshot.create", target=snapshot, data={"format": format, **cleaned, **chosen}
        )
    return snapshot


def snapshot_path(snapshot: Snapshot, kind: str = FileKind.DATA) -> Path | None:
    """Where one of the snapshot's files is (the data file by default, the shards' folder for Parquet; None for a
    file it does not have)."""
    if kind == FileKind.DATA:
        return Path(settings.EXPORTS_DIR) / snapshot.file
    entry = snapshot.file_entry(kind)
    return Path(settings.EXPORTS_DIR) / entry["path"] if entry else None


def snapshot_folder_name(snapshot: Snapshot) -> str:
    return f"snapshot-{snapshot.pk}"


def snapshot_file_name(snapshot: Snapshot) -> str:
    """The data file's name: `snapshot-7-sharegpt.zip` (its manifest and report are named after it; a Parquet
    snapshot's shards are `data/train-00000-of-00002.parquet`, its manifest `snapshot-7-parquet.manifest.jsonl`)."""
    return f"snapshot-{snapshot.pk}-{snapshot.format}.{EXTENSIONS[snapshot.format]}"


def _snapshot_temp_pattern(snapshot: Snapshot) -> str:
    """Temporary folders of one snapshot: hidden, one per delivery, never the name a row points at."""
    return f".{snapshot_folder_name(snapshot)}.*.part"


class SnapshotRecorder:
    """Records a built file set on its snapshot, in the transaction that finishes the job unit.

    The job engine calls it only while the unit is still pending; when the job was cancelled or
    another delivery finished first, it calls `discard` instead, which removes the files.
    """

    def __init__(self, *, snapshot: Snapshot, temp: Path, result: ExportResult):
        self.snapshot, self.temp, self.result = snapshot, temp, result

    def discard(self) -> None:
        shutil.rmtree(self.temp, ignore_errors=True)

    def __call__(self) -> dict:
        stats, snapshot = self.result.stats, self.snapshot
        folder = snapshot_folder_name(snapshot)
        files = [{**f.as_dict(), "path": f"{folder}/{f.name}"} for f in self.result.files]
        updated = Snapshot.objects.filter(pk=snapshot.pk, sha256="").update(
            count=stats.count,
            refused_count=stats.refused_count,
            refusal_reasons=dict(stats.refusal_reasons),
            refusals=stats.refusals,
            repaired_count=stats.repaired_count,
            bytes=self.result.bytes,
            sha256=self.result.sha256,
            file=f"{folder}/{'data' if snapshot.format in SHARDED else self.result.file(FileKind.DATA).name}",
            files=files,
            error="",
            built_at=timezone.now(),
        )
        if not updated:  # only the first build of a snapshot is kept
            self.discard()
            return {"snapshot": snapshot.pk, "duplicate": True}
        exports_dir = Path(settings.EXPORTS_DIR)
        # Moved before the row commits, so a committed row never points at missing files. A folder already there
        # was moved by a delivery whose commit never came (no committed row points at it): this one replaces it.
        shutil.rmtree(exports_dir / folder, ignore_errors=True)
        os.replace(self.temp, exports_dir / folder)
        # The unit is done now and no other delivery will be recorded: folders left by one that
        # crashed (or is still writing) can go.
        for leftover in exports_dir.glob(_snapshot_temp_pattern(snapshot)):
            shutil.rmtree(leftover, ignore_errors=True)
        # The parts go once the row is committed: until then a delivery of the merge may have to run again.
        transaction.on_commit(lambda: snapshot_parts_remove(snapshot=snapshot))
        snapshot_ready.send(sender=Snapshot, snapshot_id=snapshot.pk)
        return {
            "snapshot": snapshot.pk,
            "count": stats.count,
            "refused": stats.refused_count,
            "sha256": self.result.sha256,
        }


def _snapshot_about(snapshot: Snapshot) -> tuple[int, ExportOptions]:
    """The workspace a snapshot reads and how it is written."""
    options = ExportOptions(
        label=f"simia_snapshot_{snapshot.pk}",
        shard_rows=snapshot.options.get("shard_rows", 0),
        shard_bytes=snapshot.options.get("shard_bytes", 0),
        dedup=snapshot.options.get("dedup", ""),
    )
    return owner_workspace_id(snapshot.job), options


def snapshot_ranges(*, snapshot: Snapshot) -> list[IdRange]:
    """The ranges of trajectory ids a snapshot's records are built in: about EXPORT_RANGE_RECORDS records each, each
    naming the near-duplicates in it the snapshot leaves out when it keeps one per cluster (read here, once)."""
    workspace_id, options = _snapshot_about(snapshot)
    return _ranges(export_queryset(snapshot.filters, workspace_id=workspace_id), options.dedup)


def snapshot_parts_folder(snapshot: Snapshot) -> Path:
    """Where a snapshot's parts are while it is built: hidden, beside the snapshots' folders (every worker writes
    and the merge reads there, so EXPORTS_DIR is a folder they share)."""
    return Path(settings.EXPORTS_DIR) / f".{snapshot_folder_name(snapshot)}.parts"


def snapshot_parts_remove(*, snapshot: Snapshot) -> None:
    """Remove a snapshot's parts once it is recorded."""
    shutil.rmtree(snapshot_parts_folder(snapshot), ignore_errors=True)


def snapshot_leftovers_remove(*, snapshot: Snapshot) -> None:
    """Remove what a snapshot's job leaves once it has ended (built, failed or cancelled): its parts, and the
    temporary folders of deliveries a worker's death cut short (no unit of the job will record them)."""
    snapshot_parts_remove(snapshot=snapshot)
    for leftover in Path(settings.EXPORTS_DIR).glob(_snapshot_temp_pattern(snapshot)):
        shutil.rmtree(leftover, ignore_errors=True)


def _snapshot_failed(snapshot: Snapshot, exc: Exception) -> None:
    """Note why the snapshot was not built: the first failure (a part's, rather than the merge's that misses it)."""
    Snapshot.objects.filter(pk=snapshot.pk, sha256="", error="").update(error=f"{type(exc).__name__}: {exc}"[:4000])


class PartRecorder:
    """Puts a written part in place, in the transaction that finishes its unit (so a part is in place once, by the
    delivery the unit records); `discard` removes it instead."""

    def __init__(self, *, snapshot: Snapshot, index: int, temp: Path, about: dict):
        self.snapshot, self.index, self.temp, self.about = snapshot, index, temp, about

    def discard(self) -> None:
        shutil.rmtree(self.temp, ignore_errors=True)

    def __call__(self) -> dict:
        final = snapshot_parts_folder(self.snapshot) / part_name(self.index)
        # One there was put by a delivery whose commit never came (its unit is still pending): this one replaces it.
        shutil.rmtree(final, ignore_errors=True)
        os.replace(self.temp, final)
        stats = self.about["stats"]
        return {
            "snapshot": self.snapshot.pk,
            "part": self.index,
            "count": stats["count"],
            "refused": stats["refused_count"],
        }


def snapshot_part_build(
    *, snapshot: Snapshot, index: int, bounds: IdRange, progress: ExportProgress | None = None
) -> PartRecorder:
    """Write part `index` of a snapshot (its trajectories in `bounds`) to a temporary folder of its own (one per
    delivery) and return the recorder that puts it in place; `progress` is told how far it has got."""
    parts = snapshot_parts_folder(snapshot)
    parts.mkdir(parents=True, exist_ok=True)
    temp = parts / f".{part_name(index)}.{uuid.uuid4().hex}.tmp"
    temp.mkdir()
    workspace_id, options = _snapshot_about(snapshot)
    certify = snapshot.options.get("certify")
    try:
        queryset = bounds.of(export_queryset(snapshot.filters, workspace_id=workspace_id))
        about = _part_into(
            format=snapshot.format,
            queryset=queryset,
            part=Part(temp),
            options=options,
            audit=certify["audit"] if certify else None,
            progress=progress,
        )
    except Exception as exc:
        shutil.rmtree(temp, ignore_errors=True)
        _snapshot_failed(snapshot, exc)
        raise
    return PartRecorder(snapshot=snapshot, index=index, temp=temp, about=about)


def snapshot_build(
    *, snapshot: Snapshot, parts: int, removed: int, progress: ExportProgress | None = None
) -> SnapshotRecorder:
    """Merge the snapshot's `parts` parts (all in place) into its file set, in a temporary folder of its own, and
    return the recorder that puts it in place; `removed`: the near-duplicates its ranges left out; `progress` is told
    the parts merged."""
    exports_dir = Path(settings.EXPORTS_DIR)
    exports_dir.mkdir(parents=True, exist_ok=True)
    temp = exports_dir / _snapshot_temp_pattern(snapshot).replace("*", uuid.uuid4().hex)
    temp.mkdir()
    about: dict[str, Any] = {
        "snapshot": snapshot.pk,
        "requested_by": snapshot.created_by.username if snapshot.created_by else None,
    }
    workspace_id, options = _snapshot_about(snapshot)
    try:
        if snapshot.options.get("certify"):
            about["audit"] = snapshot_certificate(snapshot.options["certify"])
        written = [Part(snapshot_parts_folder(snapshot) / part_name(index)) for index in range(parts)]
        missing = [index + 1 for index, part in enumerate(written) if not part.about.is_file()]
        if missing:
            raise ApplicationError(f"part(s) {', '.join(map(str, missing))} of {parts} were not built")
        if progress is not None:
            progress(0, parts)
        result = _export_merged(
            format=snapshot.format,
            filters=snapshot.filters,
            workspace_id=workspace_id,
            parts=written,
            folder=temp,
            names=export_file_names(snapshot_file_name(snapshot)),
            options=options,
            about=about,
            removed=removed,
        )
        if progress is not None:
            progress(parts, parts)
    except Exception as exc:
        shutil.rmtree(temp, ignore_errors=True)
        _snapshot_failed(snapshot, exc)
        raise
    return SnapshotRecorder(snapshot=snapshot, temp=temp, result=result)


def snapshot_publish(*, snapshot: Snapshot) -> dict:
    """Push a built snapshot's files to its Hugging Face dataset repo (the hub_repo option, else the
    SIMIA_HF_DATASET_REPO setting); the outcome, pushed or skipped or failed with the reason, is returned for
    snapshot_hub_record. Makes network calls: never inside a transaction."""
    folder = Path(settings.EXPORTS_DIR) / snapshot_folder_name(snapshot)
    repo = snapshot.options.get("hub_repo") or settings.HF_DATASET_REPO
    names = [entry["name"] for entry in snapshot.files]
    message = f"Simia Web snapshot {snapshot.pk} ({snapshot.format})"
    return hub_push(folder=folder, names=names, repo=repo, message=message)


def snapshot_hub_record(*, snapshot: Snapshot, outcome: dict) -> None:
    Snapshot.objects.filter(pk=snapshot.pk).update(hub=outcome)
    audit_record(actor=None, action=f"snapshot.hub_{outcome['status']}", target=snapshot, data=outcome)
