"""Reading import files safely: size limits, binary and encoding checks, JSON / JSONL records with
the line each record starts on. Every failure becomes an ImportIssue, never a traceback."""

import io
import json
import zipfile
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from .errors import Collected, ImportIssue

_decoder = json.JSONDecoder()


@dataclass(frozen=True)
class Record:
    value: object
    line: int
    number: int  # 1-based position in the file


def _limit_bytes() -> int:
    return settings.SIMIA_IMPORT_MAX_BYTES


def _limit_records() -> int:
    return settings.SIMIA_IMPORT_MAX_RECORDS


def _size_check(name: str, size: int) -> None:
    if size > _limit_bytes():
        raise Collected(
            ImportIssue(
                name, None, "", f"file is {size:,} bytes; the limit is {_limit_bytes():,} (SIMIA_IMPORT_MAX_BYTES)"
            )
        )


def bytes_read(source, name: str) -> bytes:
    """All bytes of a Path or an uploaded file, refusing oversized ones before reading them."""
    if isinstance(source, Path):
        try:
            size = source.stat().st_size
        except OSError as exc:
            raise Collected(ImportIssue(name, None, "", f"cannot read: {exc.strerror or exc}")) from None
        _size_check(name, size)
        return source.read_bytes()
    size = getattr(source, "size", None)
    if size is not None:
        _size_check(name, size)
    source.seek(0)
    data = b"".join(source.chunks()) if hasattr(source, "chunks") else source.read()
    _size_check(name, len(data))
    return data


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


def _limit_records_check(name: str, count: int) -> None:
    if count > _limit_records():
        raise Collected(
            ImportIssue(name, None, "", f"more than {_limit_records():,} records (SIMIA_IMPORT_MAX_RECORDS)")
        )


def _array_records(text: str, name: str) -> list[Record]:
    """Elements of a top-level JSON array, each with the line it starts on."""
    records = []
    position = text.index("[") + 1
    length = len(text)
    while True:
        while position < length and text[position] in " \t\r\n":
            position += 1
        if position < length and text[position] == "]" and not records:
            position += 1
            break
        try:
            value, end = _decoder.raw_decode(text, position)
        except json.JSONDecodeError as exc:
            raise Collected(_json_issue(name, exc)) from None
        records.append(Record(value, text.count("\n", 0, position) + 1, len(records) + 1))
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
    records = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line)
        except json.JSONDecodeError as exc:
            raise Collected(_json_issue(name, exc, line_offset=number - 1)) from None
        records.append(Record(value, number, len(records) + 1))
        _limit_records_check(name, len(records))
    return records


def records_read(source, name: str) -> list[Record]:
    """Records of a JSON array, a JSON object (one record) or JSON Lines file."""
    text = text_decode(bytes_read(source, name), name)
    stripped = text.lstrip()
    if stripped.startswith("["):
        return _array_records(text, name)
    if not stripped.startswith("{"):
        first_line = text[: len(text) - len(stripped)].count("\n") + 1
        raise Collected(ImportIssue(name, first_line, "", "expected a JSON array or JSON Lines of objects"))
    try:
        whole = json.loads(text)
    except json.JSONDecodeError:
        return _jsonl_records(text, name)
    return [Record(whole, text[: len(text) - len(stripped)].count("\n") + 1, 1)]


def json_read(source, name: str):
    text = text_decode(bytes_read(source, name), name)
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise Collected(_json_issue(name, exc)) from None


class Folder:
    """The files of a τ² domain: a directory on disk or a .zip of one (matched by base name)."""

    def __init__(self, source, name: str):
        self.name = name
        self._dir = source if isinstance(source, Path) and source.is_dir() else None
        self._zip = None
        if self._dir is None:
            data = bytes_read(source, name)

            try:
                self._zip = zipfile.ZipFile(io.BytesIO(data))
            except zipfile.BadZipFile:
                raise Collected(ImportIssue(name, None, "", "expected a τ² domain folder or a .zip of one")) from None
            self._members = {}
            for info in sorted(self._zip.infolist(), key=lambda i: i.filename.count("/")):
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
        """A Path, or for zips an in-memory file, for the reading helpers above."""
        if self._dir is not None:
            return self._dir / base
        info = self._members[base]
        _size_check(self.path(base), info.file_size)
        return _Blob(self._zip.read(info))


class _Blob:
    def __init__(self, data: bytes):
        self.data, self.size = data, len(data)

    def seek(self, _):
        pass

    def read(self):
        return self.data
