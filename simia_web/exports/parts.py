"""An export in parts: its records planned as ranges of trajectory ids (about EXPORT_RANGE_RECORDS records each),
each range written by any worker into a part (a folder of its own), and the parts merged in id order into the files
one pass over every record writes.

A part holds its records as the data file holds them (writers.WRITERS), its manifest lines (their index counted
from 0 in the part), and `part.json`: what the gate counted and refused and the dataset card's facts, as JSON
(records.ExportStats.as_part), with the digests of its Parquet shards. The merge streams: a block of a part at a
time, a manifest line at a time; what it holds in memory does not grow with a part.
"""

import json
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.db.models import F

from simia_web.core.expressions import AmongIds

from .files import FileDigest, HashingWriter, Shards, file_synced
from .models import FileKind
from .records import ExportStats, Lines, Manifest, manifest_lines_renumbered
from .writers import ASSEMBLERS, COPY_BYTES, EXTENSIONS, SHARDED, WRITERS, Tau2Part

ID_CHUNK = 20_000  # ids read at a time when a plan is made


@dataclass(frozen=True)
class IdRange:
    """Trajectory ids `low` to `high`, both included (`low` None: from the first), less `left_out`: the near-duplicates
    of the range an export that keeps one per cluster leaves out, read once when the export was planned."""

    low: int | None
    high: int
    left_out: tuple[int, ...] = ()

    def of(self, queryset):
        """The queryset's trajectories in the range, less those it leaves out."""
        queryset = queryset.filter(pk__lte=self.high)
        if self.low is not None:
            queryset = queryset.filter(pk__gte=self.low)
        return queryset.exclude(AmongIds(F("pk"), self.left_out)) if self.left_out else queryset


def export_ranges(queryset, per_range: int, *, leaving: frozenset[int] = frozenset()) -> list[IdRange]:
    """The queryset's trajectories less those `leaving` as ranges of `per_range` of them in id order (the last holds
    the rest), found by reading their ids once; one range (of none) when there are none. The ranges meet: an id between
    two of those read (a trajectory that comes to match later) is in one of them, and none reaches past the last id
    read. Each range names the ids of `leaving` it spans, to leave out; the last also those past its end, so that the
    ranges name every id of `leaving` the queryset holds."""
    starts: list[int] = []
    left_out: list[list[int]] = [[]]
    kept, last = 0, None
    for pk in queryset.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=ID_CHUNK):
        if pk in leaving:
            left_out[-1].append(pk)
            continue
        if kept % per_range == 0:
            if starts:  # a new range: the ids left out from here on are its own
                left_out.append([])
            starts.append(pk)
        kept += 1
        last = pk
    if last is None:
        return [IdRange(None, 0, tuple(left_out[0]))]
    highs = [start - 1 for start in starts[1:]] + [last]
    return [
        IdRange(None if i == 0 else start, high, tuple(dropped))
        for i, (start, high, dropped) in enumerate(zip(starts, highs, left_out, strict=True))
    ]


class Part:
    """The files of one part, in `folder`."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self.data = self.folder / "records"  # the records (openai, sharegpt: lines; tau2: simulations)
        self.tasks = self.folder / "tasks"  # tau2: the records of its trajectories' tasks
        self.seedless = self.folder / "seedless"  # tau2: the tasks made from its trajectories without one
        self.manifest = self.folder / "manifest.jsonl"
        self.about = self.folder / "part.json"

    def read_about(self) -> dict:
        return json.loads(self.about.read_bytes())


def part_write(
    *,
    format: str,
    queryset,
    part: Part,
    manifest_for: Callable[[HashingWriter], Manifest],
    label: str,
    shard_rows: int,
    shard_bytes: int,
    progress: Callable[[int, int], None] | None = None,
) -> dict:
    """Write the records of `queryset` (one range of an export) into `part` (its folder exists and is empty), synced
    to disk, and return what part.json holds. `progress` is told the records the gate has handled of those the range
    holds: at the start, every records.PROGRESS_EVERY records, and at the end."""
    stats = ExportStats()
    if progress is not None:
        total = queryset.count()
        stats.progress = lambda handled: progress(handled, total)
        progress(0, total)
    shards: list[list] = []
    with open(part.manifest, "wb") as manifest_file:
        manifest = manifest_for(HashingWriter(manifest_file))
        if format in SHARDED:
            writing = Shards(
                part.folder,
                kind=FileKind.DATA,
                extension=EXTENSIONS[format],
                max_rows=shard_rows,
                max_bytes=shard_bytes,
            )
            try:
                WRITERS[format](writing, queryset, stats, label, manifest)
            finally:
                writing.abandon()  # a shard still open after a failure
            shards = [[digest.name, digest.bytes, digest.sha256] for digest in writing.finish()]
        elif format == "tau2":
            with open(part.data, "wb") as data, open(part.tasks, "wb") as tasks, open(part.seedless, "wb") as seedless:
                WRITERS[format](Tau2Part(data, tasks, seedless), queryset, stats, label, manifest)
                for handle in (data, tasks, seedless):
                    file_synced(handle)
        else:
            with open(part.data, "wb") as data:
                WRITERS[format](data, queryset, stats, label, manifest)
                file_synced(data)
        manifest.flush()
        file_synced(manifest_file)
    if progress is not None:
        progress(stats.handled, stats.handled)  # everything read was handled (the count may be off, see services)
    about = {"stats": stats.as_part(), "shards": shards, "on_evidence": getattr(manifest, "on_evidence", 0)}
    with open(part.about, "wb") as handle:
        handle.write(json.dumps(about).encode())
        file_synced(handle)
    return about


def parts_merge(
    *, format: str, parts: list[Part], folder: Path, names: dict[str, str], label: str
) -> tuple[ExportStats, list[FileDigest], int]:
    """Merge the parts, in the order given (id order), into the data file (or `data/` shards) and the manifest in
    `folder`; returns what the parts counted, merged, the data's digests then the manifest's, and the records of the
    manifest that rest on an audit's evidence. The parts are left as they were (shards are linked, not moved): a
    merge run again finds them whole."""
    stats, on_evidence = ExportStats(), 0
    shards: list[tuple] = []
    empty: list[tuple] = []
    counts = []  # each part's records: its manifest lines
    for part in parts:
        about = part.read_about()
        stats.merge_part(about["stats"])
        counts.append(about["stats"]["count"])
        on_evidence += about["on_evidence"]
        # A part of no records has one shard of no rows: kept only when every part is empty.
        (shards if about["stats"]["count"] else empty).extend((part, *shard) for shard in about["shards"])
    shards = shards or empty[:1]
    manifest_path = folder / names[FileKind.MANIFEST]
    with open(manifest_path, "wb") as manifest_file:
        manifest = HashingWriter(manifest_file)
        lines, index = Lines(manifest), 0
        for part, count in zip(parts, counts, strict=True):
            with open(part.manifest, "rb") as source:
                if index:
                    index = manifest_lines_renumbered(source, lines, index)
                else:  # the first lines: their index is the part's own
                    shutil.copyfileobj(source, manifest, COPY_BYTES)
                    index = count
        lines.flush()
        file_synced(manifest_file)
    manifest_digest = FileDigest(
        names[FileKind.MANIFEST], FileKind.MANIFEST, manifest.bytes, manifest.sha256.hexdigest()
    )
    if format in SHARDED:
        files = _shards_placed(folder, shards, EXTENSIONS[format])
    else:
        with open(folder / names[FileKind.DATA], "wb") as data_file:
            data = HashingWriter(data_file)
            ASSEMBLERS[format](data, parts, label, manifest_path)
            file_synced(data_file)
        files = [FileDigest(names[FileKind.DATA], FileKind.DATA, data.bytes, data.sha256.hexdigest())]
    return stats, [*files, manifest_digest], on_evidence


def _shards_placed(folder: Path, shards: list[tuple], extension: str) -> list[FileDigest]:
    """The parts' shards in `folder/data/`, named in order (`train-00000-of-00003`), each a link to the part's file
    (a copy where the file system has no links)."""
    (folder / "data").mkdir(parents=True, exist_ok=True)
    digests = []
    for index, (part, name, size, sha256) in enumerate(shards):
        placed = f"data/{Shards.SPLIT}-{index:05d}-of-{len(shards):05d}.{extension}"
        try:
            os.link(part.folder / name, folder / placed)
        except OSError:
            shutil.copyfile(part.folder / name, folder / placed)
        digests.append(FileDigest(placed, FileKind.DATA, size, sha256))
    return digests
