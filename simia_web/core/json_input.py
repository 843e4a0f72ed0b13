"""The one gate for JSON that enters: uploads, zip members, REST bodies, form fields, environment steps and
LLM answers.

A document is refused, with where and which limit, when it is bigger than its byte budget (counted as read,
never taken from a header), holds more values than its value budget, is nested too deep, holds a string or an
object too large, or a number that does not fit: NaN and Infinity are not JSON, `1e999` is, but overflows to
infinity, and integers beyond 64 bits break orjson and the databases' JSON columns.

Bytes alone do not bound memory: `{"a":[[],[],...]}` costs 3 bytes per empty list as text and 64 once parsed.
So the values of a document (items of arrays and objects, an empty one counting as one: the commas and opening
brackets outside its strings) are counted in C before it is parsed, and a document with more than its byte limit
/ SIMIA_JSON_BYTES_PER_VALUE of them is refused unparsed. Parsed, a document then takes at most about 12 times
its byte limit in memory (objects of one key each, the costliest shape per value, 11.2 times).

The standard library's parser takes hooks for numbers and constants, and raises RecursionError (not a crash)
on deep nesting; the size, depth and key limits are checked by one walk over the parsed value, without
recursion.
"""

import functools
import io
import json
import math
import re
from dataclasses import dataclass, replace
from itertools import count, repeat
from typing import Any

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from .errors import ValidationFailed

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
# Digits of the longest 64-bit integer with its sign: anything longer is refused before int() runs on it.
_INT_DIGITS = 20
_CHUNK = 1 << 16


class JsonRefused(ValidationFailed, ValueError):
    """A JSON document the gate refuses: `where` names the file, record or field, `path` the place inside
    the document (empty for the whole of it) and `message` the limit it breaks. Over REST it is a 400 naming
    the place: `{path or where or "body": [message]}`."""

    def __init__(self, where: str, message: str, path: str = ""):
        super().__init__(message, field=path or where or "body")
        self.where, self.message, self.path = where, message, path

    def __str__(self) -> str:
        place = " at ".join(part for part in (self.where, self.path) if part)
        return f"{place}: {self.message}" if place else self.message


class JsonInvalid(JsonRefused):
    """Not JSON at all (a syntax error, or bytes that are not UTF-8), as opposed to JSON over a limit."""


@dataclass(frozen=True)
class JsonLimits:
    max_bytes: int
    max_depth: int
    max_string: int
    max_keys: int
    max_items: int
    max_values: int  # arrays, objects and items in the whole document

    @functools.cached_property
    def length_within(self) -> int:
        """A text no longer than this breaks none of the limits: every level of depth, key, item and value takes a
        character of it, and a character at most four bytes. (Worked out once per set of limits.)"""
        limits = (self.max_depth, self.max_items, self.max_keys, self.max_values, self.max_string, self.max_bytes // 4)
        return min(limits) - 1

    @classmethod
    def from_settings(cls, **overrides) -> "JsonLimits":
        """The settings' limits; the value budget follows the byte limit unless it is given."""
        if not overrides:
            return _settings_limits()
        return _limits_built(_configured(), tuple(sorted(overrides.items())))


def _configured() -> tuple:
    return (
        settings.SIMIA_JSON_MAX_BYTES,
        settings.SIMIA_JSON_MAX_DEPTH,
        settings.SIMIA_JSON_MAX_STRING,
        settings.SIMIA_JSON_MAX_KEYS,
        settings.SIMIA_JSON_MAX_ITEMS,
        settings.SIMIA_JSON_BYTES_PER_VALUE,
    )


# Limits are built once per set of settings and overrides: building the frozen dataclass twice took longer than
# parsing a tool call's arguments, which an export does for every call of every record.
@functools.lru_cache(maxsize=64)
def _limits_built(configured: tuple, overrides: tuple) -> JsonLimits:
    max_bytes, max_depth, max_string, max_keys, max_items, bytes_per_value = configured
    chosen = dict(overrides)
    max_bytes = chosen.pop("max_bytes", max_bytes)
    limits = JsonLimits(
        max_bytes=max_bytes,
        max_depth=max_depth,
        max_string=max_string,
        max_keys=max_keys,
        max_items=max_items,
        max_values=max(1, max_bytes // bytes_per_value),
    )
    return replace(limits, **chosen)


@functools.cache
def _settings_limits() -> JsonLimits:
    """The settings' own limits, read once: six settings reads per document cost as much as checking a small one
    (a tool call's arguments). Forgotten when a SIMIA_JSON_* setting changes (override_settings)."""
    return _limits_built(_configured(), ())


@receiver(setting_changed)
def _settings_limits_forget(*, setting: str, **kwargs) -> None:
    if setting.startswith("SIMIA_JSON_"):
        _settings_limits.cache_clear()


def bytes_bounded(chunks, *, limit: int, where: str) -> bytes:
    """The bytes of an iterable of chunks, refused as soon as more than `limit` have arrived (gathered in one
    growing buffer, which getvalue() hands over without a copy: joining a list held them twice)."""
    gathered = io.BytesIO()
    for chunk in chunks:
        if gathered.tell() + len(chunk) > limit:
            raise JsonRefused(where, f"larger than the limit of {limit:,} bytes")
        gathered.write(chunk)
    return gathered.getvalue()


def stream_chunks(stream, size: int = _CHUNK):
    """Chunks of a file-like object, read `size` bytes at a time."""
    while chunk := stream.read(size):
        yield chunk


_NOT_KEPT = bytes(sorted(set(range(256)) - set(b'",[{')))


def _structure_count(text: str | bytes) -> int:
    if isinstance(text, str):
        return text.count(",") + text.count("[") + text.count("{")
    return text.count(b",") + text.count(b"[") + text.count(b"{")


def _structure_count_outside_strings(text: bytes) -> int:
    """Commas and opening brackets outside strings, counted in C without an object per string (a regular-
    expression substitution held 200 MB of pieces to count a 10 MB body of short strings).

    Escaped backslashes, then escaped quotes, are taken out (left to right, as a parser reads them), so that
    the quotes left delimit the strings; then all but quotes, commas and opening brackets. Two quotes in a row
    (an empty string, or two strings with nothing counted between them) change no mark's side, so they go too;
    what is left outside the strings is every second piece between the quotes that remain, which are those of
    strings holding commas or brackets."""
    marks = text.replace(b"\\\\", b"").replace(b'\\"', b"").translate(None, _NOT_KEPT).replace(b'""', b"")
    return sum(map(len, marks.split(b'"')[::2]))


def values_count_check(text: str | bytes, *, where: str, limits: JsonLimits) -> None:
    """Refuse a document with more values than limits.max_values before it is parsed: the items of its arrays
    and objects, an empty one counting as one, which are the opening brackets and commas outside its strings.

    Those of the whole text bound them from above; only a text over the limit by that count is counted again
    without its strings. In a text that is not JSON the count may be off, but only past the first error, where
    the parser stops."""
    if _structure_count(text) <= limits.max_values:
        return
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _structure_count_outside_strings(data) > limits.max_values:
        raise JsonRefused(where, _too_many_values(limits))


def _too_many_values(limits: JsonLimits) -> str:
    return f"more than {limits.max_values:,} values (items of arrays and objects; an empty one counts as one)"


def _refuse_constant(name: str):
    raise JsonRefused("", f"{name} is not a JSON number")


def _int_checked(text: str) -> int:
    if len(text) > _INT_DIGITS or not INT_MIN <= (value := int(text)) <= INT_MAX:
        raise JsonRefused("", f"the integer {text[:24]}{'…' if len(text) > 24 else ''} does not fit in 64 bits")
    return value


def _float_checked(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise JsonRefused("", f"the number {text[:24]} is out of range")
    return value


_decoder = json.JSONDecoder(parse_constant=_refuse_constant, parse_int=_int_checked, parse_float=_float_checked)
# strict=False lets raw control characters (newlines, tabs) into strings, as grammar-constrained LLM servers write them.
_lenient_decoder = json.JSONDecoder(
    parse_constant=_refuse_constant, parse_int=_int_checked, parse_float=_float_checked, strict=False
)


def value_decode(
    text: str, position: int, *, where: str, limits: JsonLimits, strict: bool = True
) -> tuple[object, int]:
    """One JSON value starting at `position` of `text` and where it ends, checked against `limits`.

    The caller counts the text's values first (values_count_check), once for the whole of it. A syntax error is
    left as json.JSONDecodeError, for callers that report it with its line."""
    try:
        value, end = (_decoder if strict else _lenient_decoder).raw_decode(text, position)
    except RecursionError:
        raise JsonRefused(where, f"nested deeper than {limits.max_depth} levels") from None
    except JsonRefused as exc:
        raise JsonRefused(where, exc.message) from None
    value_check(value, where=where, limits=limits)
    return value, end


def json_parse(data: bytes | str, *, where: str = "", limits: JsonLimits | None = None, strict: bool = True):
    """The value of one JSON document, or JsonRefused naming `where` and the limit it breaks (`strict=False`
    accepts raw control characters inside strings)."""
    limits = limits or JsonLimits.from_settings()
    # Characters are at most four bytes each: only a long text needs encoding to be measured.
    measured = data.encode() if isinstance(data, str) and len(data) * 4 > limits.max_bytes else data
    if len(measured) > limits.max_bytes:
        raise JsonRefused(where, f"larger than the limit of {limits.max_bytes:,} bytes")
    values_count_check(data, where=where, limits=limits)
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise JsonInvalid(where, f"not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start}") from None
    try:
        start = len(data) - len(data.lstrip())
        value, end = value_decode(data, start, where=where, limits=limits, strict=strict)
        if data[end:].strip():
            raise json.JSONDecodeError("Extra data", data, end)
    except json.JSONDecodeError as exc:
        raise JsonInvalid(where, f"invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}") from None
    return value


def value_check(value, *, where: str = "", limits: JsonLimits | None = None) -> None:
    """Refuse a parsed value (or one built in memory, such as an LLM's tool arguments) that breaks a limit."""
    limits = limits or JsonLimits.from_settings()
    # (node, depth, trail): a trail is the parent's trail and the node's key, None at the root.
    stack: list[tuple[Any, int, tuple | None]] = [(value, 1, None)]
    values = 0
    while stack:
        node, depth, trail = stack.pop()
        # The commonest leaf, a short ASCII string without NUL, passes here without a call (_text_problem's checks).
        if type(node) is str and len(node) <= limits.max_string and node.isascii() and "\x00" not in node:
            continue
        problem = _node_problem(node, depth, limits)
        if problem is None and isinstance(node, (dict, list)):
            values += max(1, len(node))  # as values_count_check counts them: its items, or itself when empty
            if values > limits.max_values:
                problem = _too_many_values(limits)
        if problem:
            raise JsonRefused(where, problem, _path(trail))
        # A child's place is its parent's trail and its key, spelled out only for a refusal.
        # (item, depth + 1, (trail, key)) for each child, in order, the tuples built by zip rather than a generator.
        if isinstance(node, dict):
            stack.extend(zip(node.values(), repeat(depth + 1), zip(repeat(trail), node)))
        elif isinstance(node, list):
            stack.extend(zip(node, repeat(depth + 1), zip(repeat(trail), count())))


def _path(trail) -> str:
    parts = []
    while trail is not None:
        trail, key = trail
        parts.append(f"[{key}]" if isinstance(key, int) else f".{_short(key)}")
    return "".join(reversed(parts)).lstrip(".") or "(root)"


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _text_problem(text: str, limits: JsonLimits) -> str | None:
    if len(text) > limits.max_string:
        return f"a string longer than {limits.max_string:,} characters"
    # Neither can be stored: PostgreSQL's text and jsonb refuse NUL, and UTF-8 has no lone surrogates.
    if "\x00" in text:
        return "a string with a NUL character (\\u0000)"
    if not text.isascii() and _LONE_SURROGATE.search(text):  # isascii() is a flag CPython keeps: no scan
        return "a string with an unpaired UTF-16 surrogate"
    return None


def _node_problem(node, depth: int, limits: JsonLimits) -> str | None:
    if isinstance(node, str):
        return _text_problem(node, limits)
    if isinstance(node, bool) or node is None:
        return None
    if isinstance(node, int):
        return None if INT_MIN <= node <= INT_MAX else "an integer that does not fit in 64 bits"
    if isinstance(node, float):
        return None if math.isfinite(node) else f"{node} is not a JSON number"
    if not isinstance(node, dict | list):
        return f"a {type(node).__name__} is not a JSON value"
    if depth > limits.max_depth:
        return f"nested deeper than {limits.max_depth} levels"
    if isinstance(node, list):
        return f"an array of more than {limits.max_items:,} items" if len(node) > limits.max_items else None
    if len(node) > limits.max_keys:
        return f"an object with more than {limits.max_keys:,} keys"
    return _keys_problem(node, limits)


def _keys_problem(node: dict, limits: JsonLimits) -> str | None:
    """Two passes, as every key's type and length is named before any key's text (loops: no generator per object)."""
    for key in node:
        if not isinstance(key, str) or len(key) > limits.max_string:
            return f"an object key that is not a string of at most {limits.max_string:,} characters"
    for key in node:
        if not key.isascii() or "\x00" in key:  # an ASCII key without NUL has no problem _text_problem names
            problem = _text_problem(key, limits)
            if problem:
                return f"an object key that is {problem}"
    return None


def _short(key: str) -> str:
    return key if len(key) <= 40 else f"{key[:40]}…"
