"""Building dataset file sets (data, manifest, report): one writer core shared by snapshot jobs and the `export`
command.

Checksums: the data file's sha256 is the snapshot's `sha256` (and the download's X-Checksum-SHA256); the
manifest's and the report's are in `files`; the report lists the data's and the manifest's; each manifest line
holds the sha256 of its record's bytes in the data."""

import hashlib
import json
import os
import shutil
import uuid
from contextlib import nullcontext
from dataclasses import asdict, dataclass
from pathlib import Path

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import connection, transaction
from django.utils import timezone

from simia_web.core.services import audit_record
from simia_web.jobs.services import job_create

from .formats import EXTENSIONS, WRITERS, ExportStats, Manifest
from .models import ExportFormat, FileKind, Snapshot
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


@dataclass(frozen=True)
class FileDigest:
    name: str
    kind: str
    bytes: int
    sha256: str

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class ExportResult:
    """What an export wrote: its counts and the data, the manifest and the report, each with its size and sha256."""

    stats: ExportStats
    files: list[FileDigest]

    def file(self, kind: str) -> FileDigest:
        return next(f for f in self.files if f.kind == kind)

    @property
    def bytes(self) -> int:
        return self.file(FileKind.DATA).bytes

    @property
    def sha256(self) -> str:
        return self.file(FileKind.DATA).sha256


def export_file_names(data_name: str) -> dict[str, str]:
    """The file set around a data file: `retail.zip` → `retail.manifest.jsonl` and `retail.report.json`."""
    stem = Path(data_name).stem
    return {
        FileKind.DATA: data_name,
        FileKind.MANIFEST: f"{stem}.manifest.jsonl",
        FileKind.REPORT: f"{stem}.report.json",
    }


def _synced(handle) -> None:
    handle.flush()
    os.fsync(handle.fileno())


def _report(*, format: str, filters: dict, label: str, stats: ExportStats, files: list[FileDigest], about: dict):
    """The report file: what was asked for, what was written, what was left out and why, and the sizes and sha256
    of the data and the manifest (the snapshot row holds the report's own)."""
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
        "gate": "every record passed the strict normaliser (messages and tools) and the format's validator",
        "manifest": " ".join(Manifest.__doc__.split("\n\n", 1)[1].split()),  # what its lines hold
        "files": [f.as_dict() for f in files],
    }


def _export_into(
    *, format: str, filters: dict, folder: Path, names: dict[str, str], label: str, about: dict
) -> ExportResult:
    """Write the file set into `folder` and sync it to disk; on any failure (or interruption) remove it."""
    stats = ExportStats()
    paths = {kind: folder / name for kind, name in names.items()}
    try:
        with (
            _read_transaction(),
            open(paths[FileKind.DATA], "wb") as data_file,
            open(paths[FileKind.MANIFEST], "wb") as manifest_file,
        ):
            data, manifest_stream = HashingWriter(data_file), HashingWriter(manifest_file)
            WRITERS[format](data, export_queryset(filters), stats, label, Manifest(manifest_stream, paths["manifest"]))
            _synced(data_file)
            _synced(manifest_file)
        files = [
            FileDigest(names[FileKind.DATA], FileKind.DATA, data.bytes, data.sha256.hexdigest()),
            FileDigest(
                names[FileKind.MANIFEST], FileKind.MANIFEST, manifest_stream.bytes, manifest_stream.sha256.hexdigest()
            ),
        ]
        report = _report(format=format, filters=filters, label=label, stats=stats, files=files, about=about)
        body = json.dumps(report, indent=2, ensure_ascii=False, default=str).encode()
        with open(paths[FileKind.REPORT], "wb") as report_file:
            report_file.write(body)
            _synced(report_file)
        files.append(FileDigest(names[FileKind.REPORT], FileKind.REPORT, len(body), hashlib.sha256(body).hexdigest()))
    except BaseException:
        for path in paths.values():
            path.unlink(missing_ok=True)
        raise
    return ExportResult(stats=stats, files=files)


def export_write(*, format: str, filters: dict, path: Path, label: str = "simia") -> ExportResult:
    """Write the export's data to `path`, its manifest and report beside it (see export_file_names), each through
    a temporary folder beside them and moved into place at the end."""
    if format not in WRITERS:
        raise ValueError(f"Unknown format {format!r}; choose from {', '.join(WRITERS)}.")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    names = export_file_names(path.name)
    partial = path.with_name(f".{path.name}.{uuid.uuid4().hex}.part")
    partial.mkdir()
    try:
        result = _export_into(format=format, filters=filters, folder=partial, names=names, label=label, about={})
        for name in names.values():
            os.replace(partial / name, path.parent / name)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
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


def snapshot_path(snapshot: Snapshot, kind: str = FileKind.DATA) -> Path | None:
    """Where one of the snapshot's files is (the data file by default; None for a file it does not have)."""
    if kind == FileKind.DATA:
        return Path(settings.EXPORTS_DIR) / snapshot.file
    entry = snapshot.file_entry(kind)
    return Path(settings.EXPORTS_DIR) / entry["path"] if entry else None


def snapshot_folder_name(snapshot: Snapshot) -> str:
    return f"snapshot-{snapshot.pk}"


def snapshot_file_name(snapshot: Snapshot) -> str:
    """The data file's name: `snapshot-7-sharegpt.zip` (its manifest and report are named after it)."""
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
            file=f"{folder}/{self.result.file(FileKind.DATA).name}",
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
        return {
            "snapshot": snapshot.pk,
            "count": stats.count,
            "refused": stats.refused_count,
            "sha256": self.result.sha256,
        }


def snapshot_build(*, snapshot: Snapshot) -> SnapshotRecorder:
    """Write the file set to a temporary folder of its own and return the recorder that puts it in place."""
    exports_dir = Path(settings.EXPORTS_DIR)
    exports_dir.mkdir(parents=True, exist_ok=True)
    temp = exports_dir / _snapshot_temp_pattern(snapshot).replace("*", uuid.uuid4().hex)
    temp.mkdir()
    about = {"snapshot": snapshot.pk, "requested_by": snapshot.created_by.username if snapshot.created_by else None}
    try:
        result = _export_into(
            format=snapshot.format,
            filters=snapshot.filters,
            folder=temp,
            names=export_file_names(snapshot_file_name(snapshot)),
            label=f"simia_snapshot_{snapshot.pk}",
            about=about,
        )
    except Exception as exc:
        shutil.rmtree(temp, ignore_errors=True)
        Snapshot.objects.filter(pk=snapshot.pk, sha256="").update(error=f"{type(exc).__name__}: {exc}"[:4000])
        raise
    return SnapshotRecorder(snapshot=snapshot, temp=temp, result=result)
