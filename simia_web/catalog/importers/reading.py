"""Reading import files safely: regular files only, bytes counted as they are read (a zip member's declared
size is never trusted), binary and encoding checks, and JSON / JSONL records through the JSON gate with the
line each record starts on. Every failure becomes an ImportIssue, never a traceback."""

import io
import json
import stat
import zipfile
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from django.conf import settings

from simia_web.core.json_input import (
    JsonLimits,
    JsonRefused,
    bytes_bounded,
    stream_chunks,
    value_decode,
    values_count_check,
)

from .errors import Collected, ImportIssue

# What zipfile raises on a damaged archive or member: bad headers or CRC, a broken deflate stream, a member
# that ends early, an unsupported compression method, an encrypted member.
ZIP_FAILURES = (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError, ValueError)


@dataclass(frozen=True)
class Record:
    value: Any  # a JSON value
    line: int
    number: int  # 1-based position in the file


def _limit_bytes() -> int:
    return settings.SIMIA_IMPORT_MAX_BYTES


def _limit_records() -> int:
    return settings.SIMIA_IMPORT_MAX_RECORDS


def _json_limits() -> JsonLimits:
    return JsonLimits.from_settings(max_bytes=_limit_bytes())


def _bounded(chunks, name: str) -> bytes:
    try:
        return bytes_bounded(chunks, limit=_limit_bytes(), where=name)
    except JsonRefused:
        why = f"file is larger than allowed; the limit is {_limit_bytes():,} bytes (SIMIA_IMPORT_MAX_BYTES)"
        raise Collected(ImportIssue(name, None, "", why)) from None


def _file_read(path: Path, name: str) -> bytes:
    """A regular file's bytes: devices (/dev/zero), FIFOs and folders are refused before anything is read."""
    try:
        mode = path.stat().st_mode
        if not stat.S_ISREG(mode):
            kind = "a folder" if stat.S_ISDIR(mode) else "not a regular file (a device, FIFO or socket)"
            raise Collected(ImportIssue(name, None, "", f"is {kind}; expected a file"))
        with path.open("rb") as stream:
            return _bounded(stream_chunks(stream), name)
    except OSError as exc:
        raise Collected(ImportIssue(name, None, "", f"cannot read: {exc.strerror or exc}")) from None


def bytes_read(source, name: str) -> bytes:
    """All bytes of a Path, an uploaded file or a zip member's bytes, refusing oversized ones as they are read."""
    if isinstance(source, Path):
        return _file_read(source, name)
    if isinstance(source, bytes):
        return source
    source.seek(0)
    return _bounded(source.chunks() if hasattr(source, "chunks") else stream_chunks(source), name)


def text_decode(data: bytes, name: str) -> str:
    if not data.strip():
        raise Collected(ImportIssue(name, None, "", "file is empty"))
    if b"\x00" in data[:8192]:
        raise Collected(ImportIssue(name, None, "", "file is binary, not JSON text"))
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise Collected(
            ImportIssue(name, line, "", f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}")
        ) from None


def _json_issue(name: str, exc: json.JSONDecodeError, line_offset: int = 0) -> ImportIssue:
    truncated = exc.msg.startswith(("Expecting", "Unterminated")) and exc.pos >= len(exc.doc.rstrip())
    why = "the JSON is truncated (it ends in the middle of a value)" if truncated else "invalid JSON"
    return ImportIssue(name, exc.lineno + line_offset, "", f"{why}: {exc.msg} at column {exc.colno}")


def _refused_issue(name: str, exc: JsonRefused, line: int | None = None, number: int | None = None) -> ImportIssue:
    return ImportIssue(name, line, exc.path, exc.message, number)


def _limit_records_check(name: str, count: int) -> None:
    if count > _limit_records():
        raise Collected(
            ImportIssue(name, None, "", f"more than {_limit_records():,} records (SIMIA_IMPORT_MAX_RECORDS)")
        )


def _array_records(text: str, name: str) -> list[Record]:
    """Elements of a top-level JSON array, each with the line it starts on."""
    records: list[Record] = []
    position = text.index("[") + 1
    length = len(text)
    limits = _json_limits()
    line, counted = 1, 0  # lines are counted from the last record on, not from the start each time
    while True:
        while position < length and text[position] in " \t\r\n":
            position += 1
        if position < length and text[position] == "]" and not records:
            position += 1
            break
        line += text.count("\n", counted, position)
        counted = position
        try:
            value, end = value_decode(text, position, where=name, limits=limits)
        except json.JSONDecodeError as exc:
            raise Collected(_json_issue(name, exc)) from None
        except JsonRefused as exc:
            raise Collected(_refused_issue(name, exc, line, len(records) + 1)) from None
        records.append(Record(value, line, len(records) + 1))
        _limit_records_check(name, len(records))
        position = end
        while position < length and text[position] in " \t\r\n":
            position += 1
        if position < length and text[position] == ",":
            position += 1
            continue
        if position < length and text[position] == "]":
            position += 1
            break
        line = text.count("\n", 0, position) + 1
        if position >= length:
            raise Collected(ImportIssue(name, line, "", "the JSON is truncated: the array is never closed"))
        raise Collected(ImportIssue(name, line, "", f"invalid JSON: expected ',' or ']' but found {text[position]!r}"))
    if text[position:].strip():
        raise Collected(ImportIssue(name, text.count("\n", 0, position) + 1, "", "invalid JSON: text after the array"))
    return records


def _jsonl_records(text: str, name: str) -> list[Record]:
    records: list[Record] = []
    limits = _json_limits()
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value, end = value_decode(line, len(line) - len(line.lstrip()), where=name, limits=limits)
            if line[end:].strip():
                raise json.JSONDecodeError("Extra data", line, end)
        except json.JSONDecodeError as exc:
            raise Collected(_json_issue(name, exc, line_offset=number - 1)) from None
        except JsonRefused as exc:
            raise Collected(_refused_issue(name, exc, number, len(records) + 1)) from None
        records.append(Record(value, number, len(records) + 1))
        _limit_records_check(name, len(records))
    return records


def _json_text(source, name: str) -> str:
    """The file's text, once its values are counted: a file holding more than its byte limit allows is refused
    before any of it is parsed (a 51 KB zip inflating to `{"a":[[],[],...]}` took 1.3 GB to refuse parsed)."""
    data = bytes_read(source, name)
    try:
        values_count_check(data, where=name, limits=_json_limits())
    except JsonRefused as exc:
        raise Collected(_refused_issue(name, exc)) from None
    return text_decode(data, name)


def records_read(source, name: str) -> list[Record]:
    """Records of a JSON array, a JSON object (one record) or JSON Lines file."""
    text = _json_text(source, name)
    stripped = text.lstrip()
    if stripped.startswith("["):
        return _array_records(text, name)
    if not stripped.startswith("{"):
        first_line = text[: len(text) - len(stripped)].count("\n") + 1
        raise Collected(ImportIssue(name, first_line, "", "expected a JSON array or JSON Lines of objects"))
    first_line = text[: len(text) - len(stripped)].count("\n") + 1
    try:
        whole = _whole_decode(text, name)
    except json.JSONDecodeError:
        return _jsonl_records(text, name)
    except JsonRefused as exc:
        raise Collected(_refused_issue(name, exc, first_line, 1)) from None
    return [Record(whole, first_line, 1)]


def _whole_decode(text: str, name: str):
    value, end = value_decode(text, len(text) - len(text.lstrip()), where=name, limits=_json_limits())
    if text[end:].strip():
        raise json.JSONDecodeError("Extra data", text, end)
    return value


def json_read(source, name: str):
    text = _json_text(source, name)
    try:
        return _whole_decode(text, name)
    except json.JSONDecodeError as exc:
        raise Collected(_json_issue(name, exc)) from None
    except JsonRefused as exc:
        raise Collected(_refused_issue(name, exc)) from None


class Folder:
    """The files of a τ² domain: a directory on disk or a .zip of one (matched by base name)."""

    def __init__(self, source, name: str):
        self.name = name
        self._dir = source if isinstance(source, Path) and source.is_dir() else None
        self._zip: zipfile.ZipFile | None = None
        self._members: dict[str, zipfile.ZipInfo] = {}
        if self._dir is None:
            data = bytes_read(source, name)
            try:
                self._zip = zipfile.ZipFile(io.BytesIO(data))
                infos = self._zip.infolist()
            except ZIP_FAILURES:
                raise Collected(ImportIssue(name, None, "", "expected a τ² domain folder or a .zip of one")) from None
            limit = settings.SIMIA_IMPORT_MAX_ZIP_MEMBERS
            if len(infos) > limit:
                raise Collected(
                    ImportIssue(name, None, "", f"the zip holds {len(infos):,} entries; the limit is {limit:,}")
                )
            for info in sorted(infos, key=lambda i: i.filename.count("/")):
                base = info.filename.rsplit("/", 1)[-1]
                if base and not info.is_dir():
                    self._members.setdefault(base, info)

    def path(self, base: str) -> str:
        if self._dir is not None:
            return str(self._dir / base)
        return f"{self.name}:{self._members[base].filename}" if base in self._members else f"{self.name}:{base}"

    def has(self, base: str) -> bool:
        return (self._dir / base).is_file() if self._dir is not None else base in self._members

    def source(self, base: str):
        """A Path, or for zips the member's bytes, inflated a chunk at a time and counted as they come: a
        member whose header understates its size is refused at the byte limit or by its CRC check."""
        if self._dir is not None:
            return self._dir / base
        name = self.path(base)
        assert self._zip is not None  # a folder is a directory or a zip
        try:
            with self._zip.open(self._members[base]) as member:
                return _bounded(stream_chunks(member), name)
        except ZIP_FAILURES as exc:
            raise Collected(ImportIssue(name, None, "", f"damaged zip member: {exc}")) from None
