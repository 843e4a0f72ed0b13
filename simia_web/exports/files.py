"""The files of an export as they are written: each hashed and counted on its way to disk, and the shards of a
sharded data set (Hugging Face's `data/train-00000-of-00003.parquet`), named with their count once it is known."""

import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import BinaryIO


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

    # What pyarrow asks of a Python file it writes to (pyarrow.PythonFile).
    @property
    def closed(self) -> bool:
        return self.stream.closed

    def tell(self) -> int:
        return self.bytes


def file_synced(handle) -> None:
    handle.flush()
    os.fsync(handle.fileno())


@dataclass(frozen=True)
class FileDigest:
    name: str  # the path inside the file set's folder: `retail.jsonl`, `data/train-00000-of-00002.parquet`
    kind: str
    bytes: int
    sha256: str

    def as_dict(self) -> dict:
        return asdict(self)


def digest_of(folder: Path, name: str, kind: str, body: bytes) -> FileDigest:
    """Write `body` to `folder/name` (synced) and return its digest."""
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as handle:
        handle.write(body)
        file_synced(handle)
    return FileDigest(name, kind, len(body), hashlib.sha256(body).hexdigest())


class Shards:
    """Data files written one after another into `data/` of a folder, each through a HashingWriter.

    A writer calls `open()` for each shard and `close()` when it is complete; `finish()` names them
    `data/train-00000-of-00003.parquet` (the count is known only at the end) and returns their digests.
    `max_rows` and `max_bytes` are the writer's to keep (a shard is complete when it reaches either).
    """

    SPLIT = "train"

    def __init__(self, folder: Path, *, kind: str, extension: str, max_rows: int, max_bytes: int):
        self.folder, self.kind, self.extension = folder, kind, extension
        self.max_rows, self.max_bytes = max_rows, max_bytes
        self.written: list[tuple[Path, HashingWriter]] = []
        self.handle: BinaryIO | None = None
        (folder / "data").mkdir(parents=True, exist_ok=True)

    def open(self) -> HashingWriter:
        path = self.folder / "data" / f".{self.SPLIT}-{len(self.written):05d}.partial"
        self.handle = open(path, "wb")  # noqa: SIM115 (closed by close())
        stream = HashingWriter(self.handle)
        self.written.append((path, stream))
        return stream

    def close(self) -> None:
        assert self.handle is not None  # the shard open() made
        file_synced(self.handle)
        self.handle.close()
        self.handle = None

    def abandon(self) -> None:
        """Close a shard left open by a writer that failed (its file goes with the folder)."""
        if self.handle is not None:
            self.handle.close()
            self.handle = None

    def finish(self) -> list[FileDigest]:
        total, digests = len(self.written), []
        for index, (path, stream) in enumerate(self.written):
            name = f"data/{self.SPLIT}-{index:05d}-of-{total:05d}.{self.extension}"
            os.replace(path, self.folder / name)
            digests.append(FileDigest(name, self.kind, stream.bytes, stream.sha256.hexdigest()))
        return digests


def data_sha256(digests: list[FileDigest]) -> str:
    """The data's checksum: a single file's sha256; for shards, the sha256 of their `sha256sum` lines in order
    (`cd snapshot && sha256sum data/* | sha256sum` gives it again)."""
    if len(digests) == 1:
        return digests[0].sha256
    listing = "".join(f"{digest.sha256}  {digest.name}\n" for digest in digests)
    return hashlib.sha256(listing.encode()).hexdigest()
