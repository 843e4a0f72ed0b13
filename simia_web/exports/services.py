"""Building dataset files: one writer core shared by snapshot jobs and the `export` command."""

import hashlib
import os
import uuid
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from simia_web.core.services import audit_record
from simia_web.jobs.services import job_create

from .formats import EXTENSIONS, WRITERS, ExportStats
from .models import ExportFormat, Snapshot
from .selectors import export_filters_clean, export_queryset

EXPORT = "export"  # the job kind that builds a snapshot (registered in exports.pipelines)


class HashingWriter:
    """A write-only binary stream that counts and hashes every byte on its way to the file."""

    def __init__(self, stream):
        self.stream = stream
        self.sha256 = hashlib.sha256()
        self.bytes = 0

    def write(self, data) -> int:
        self.sha256.update(data)
        self.bytes += len(data)
        return self.stream.write(data)

    def flush(self) -> None:
        self.stream.flush()


def _read_transaction():
    """PostgreSQL streams rows through a server-side cursor only inside a transaction (which also
    gives every pass of a writer the same data). SQLite reads in batches without one, and a
    transaction there would hold the write lock for the whole export."""
    return transaction.atomic() if connection.vendor == "postgresql" else nullcontext()


@dataclass
class ExportResult:
    stats: ExportStats
    bytes: int
    sha256: str


def _export_into(*, format: str, filters: dict, path: Path, label: str) -> ExportResult:
    """Write the export to `path` and sync it to disk; on any failure (or interruption) remove it."""
    stats = ExportStats()
    try:
        with open(path, "wb") as handle, _read_transaction():
            target = HashingWriter(handle)
            WRITERS[format](target, export_queryset(filters), stats, label)
            handle.flush()
            os.fsync(handle.fileno())
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    return ExportResult(stats=stats, bytes=target.bytes, sha256=target.sha256.hexdigest())


def export_write(*, format: str, filters: dict, path: Path, label: str = "simia") -> ExportResult:
    """Write the export to `path` (through a temporary file beside it, renamed at the end)."""
    if format not in WRITERS:
        raise ValueError(f"Unknown format {format!r}; choose from {', '.join(WRITERS)}.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    try:
        result = _export_into(format=format, filters=filters, path=partial, label=label)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return result


def snapshot_create(*, format: str, filters: dict | None, actor=None) -> Snapshot:
    """Record the request and queue the job that builds it."""
    if format not in ExportFormat.values:
        raise ValidationError({"format": f"choose from {', '.join(ExportFormat.values)}"})
    cleaned = export_filters_clean(filters)
    actor = actor if getattr(actor, "pk", None) else None
    with transaction.atomic():
        job = job_create(kind=EXPORT, params={"format": format, "filters": cleaned}, actor=actor)
        snapshot = Snapshot.objects.create(format=format, filters=cleaned, job=job, created_by=actor)
        audit_record(actor=actor, action="snapshot.create", target=snapshot, data={"format": format, **cleaned})
    return snapshot


def snapshot_path(snapshot: Snapshot) -> Path:
    return Path(settings.EXPORTS_DIR) / snapshot.file


def snapshot_file_name(snapshot: Snapshot) -> str:
    return f"snapshot-{snapshot.pk}-{snapshot.format}.{EXTENSIONS[snapshot.format]}"


def _snapshot_temp_pattern(name: str) -> str:
    """Temporary files of one snapshot: hidden, one per delivery, never the name a row points at."""
    return f".{name}.*.part"


class SnapshotRecorder:
    """Records a built file on its snapshot, in the transaction that finishes the job unit.

    The job engine calls it only while the unit is still pending; when the job was cancelled or
    another delivery finished first, it calls `discard` instead, which removes the file.
    """

    def __init__(self, *, snapshot_id: int, temp: Path, name: str, result: ExportResult):
        self.snapshot_id, self.temp, self.name, self.result = snapshot_id, temp, name, result

    def discard(self) -> None:
        self.temp.unlink(missing_ok=True)

    def __call__(self) -> dict:
        stats = self.result.stats
        updated = Snapshot.objects.filter(pk=self.snapshot_id, sha256="").update(
            count=stats.count,
            refused_count=stats.refused_count,
            refusal_reasons=dict(stats.refusal_reasons),
            refusals=stats.refusals,
            repaired_count=stats.repaired_count,
            bytes=self.result.bytes,
            sha256=self.result.sha256,
            file=self.name,
            error="",
            built_at=timezone.now(),
        )
        if not updated:  # only the first build of a snapshot is kept
            self.discard()
            return {"snapshot": self.snapshot_id, "duplicate": True}
        exports_dir = Path(settings.EXPORTS_DIR)
        # Renamed before the row commits, so a committed row never points at a missing file.
        os.replace(self.temp, exports_dir / self.name)
        # The unit is done now and no other delivery will be recorded: files left by one that
        # crashed (or is still writing) can go.
        for leftover in exports_dir.glob(_snapshot_temp_pattern(self.name)):
            leftover.unlink(missing_ok=True)
        return {
            "snapshot": self.snapshot_id,
            "count": stats.count,
            "refused": stats.refused_count,
            "sha256": self.result.sha256,
        }


def snapshot_build(*, snapshot: Snapshot) -> SnapshotRecorder:
    """Write the file to a temporary name of its own and return the recorder that puts it in place."""
    name = snapshot_file_name(snapshot)
    exports_dir = Path(settings.EXPORTS_DIR)
    exports_dir.mkdir(parents=True, exist_ok=True)
    temp = exports_dir / _snapshot_temp_pattern(name).replace("*", uuid.uuid4().hex)
    try:
        result = _export_into(
            format=snapshot.format, filters=snapshot.filters, path=temp, label=f"simia_snapshot_{snapshot.pk}"
        )
    except Exception as exc:
        Snapshot.objects.filter(pk=snapshot.pk, sha256="").update(error=f"{type(exc).__name__}: {exc}"[:4000])
        raise
    return SnapshotRecorder(snapshot_id=snapshot.pk, temp=temp, name=name, result=result)
