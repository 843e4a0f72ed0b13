"""Comparing a simulated tool response with the reference's answer to the same call.

Both sides are read first: a tool message's content is text, and text that holds JSON is read as that value.
Then:

- **equal**: the same value as canonical JSON (keys sorted, no whitespace);
- **equivalent**, by the structural method: the same facts once formatting is set aside. JSON text inside a
  string is read as the value it holds; whitespace runs in text are collapsed and trimmed and text is compared
  in Unicode NFC; numbers are compared by value, and text that is only a number counts as that number; a member
  whose value is null is no fact, the same as a missing one (so key order, indentation, `12.50` against `12.5`,
  `"3"` against `3` and `"cancel_reason": null` do not matter). An answer the reference
  reported as an error and a simulated error (an object with an `error` member, or text starting with
  "Error") are the same fact: the call failed, whatever the wording;
- **different**: anything else, with the first places they differ (as JSON Pointers);
- a **reference error** (the reference could not answer at all) is decided before any comparison.
"""

import re
import unicodedata
from decimal import Decimal, InvalidOperation

from simia_web.core.json_input import json_parse
from simia_web.core.jsonutil import canonical_bytes

from .models import Outcome

METHOD = "structural"
METHOD_STATEMENT = (
    "structural: JSON text read as its value, key order ignored, whitespace collapsed, text in NFC, numbers "
    "(also written as text) by value, null members as missing ones, and a reported error against a simulated "
    "error counted as the same fact"
)
MAX_DIFFERENCES = 5
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")
_SPACES = re.compile(r"\s+")


def response_value(content):
    """A response as a value: text that is JSON read as what it holds, anything else as it is."""
    if not isinstance(content, str):
        return content
    try:
        return json_parse(content, where="a tool response", strict=False)
    except ValueError:
        return content


def compare(simulated, reference, *, reference_is_error: bool) -> tuple[str, str]:
    """(outcome, detail) for two responses already read with response_value."""
    if canonical_bytes(simulated) == canonical_bytes(reference):
        return Outcome.EQUAL, ""
    if reference_is_error and _is_error(simulated):
        return Outcome.EQUIVALENT, "both report an error"
    left, right = _facts(simulated), _facts(reference)
    if left == right:
        return Outcome.EQUIVALENT, "the same facts, formatted differently"
    return Outcome.DIFFERENT, "; ".join(_differences(left, right, ""))


def _is_error(value) -> bool:
    if isinstance(value, dict):
        return "error" in value or "errors" in value
    return isinstance(value, str) and value.strip().lower().startswith("error")


class _Number:
    """A number by value (never equal to a boolean, as 1 is to True in Python)."""

    __slots__ = ("value",)

    def __init__(self, value: Decimal):
        self.value = value.normalize() if value.is_finite() else value

    def __eq__(self, other):
        return isinstance(other, _Number) and self.value == other.value

    def __hash__(self):
        return hash(self.value)

    def __repr__(self):
        return format(self.value, "f") if self.value.is_finite() else str(self.value)


def _facts(value, depth: int = 0):
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int | float):
        return _Number(Decimal(str(value)))
    if isinstance(value, dict):
        return {_text(str(key)): _facts(item, depth + 1) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [_facts(item, depth + 1) for item in value]
    text = _text(str(value))
    if text[:1] in ("{", "[") and depth < 8:
        try:
            return _facts(json_parse(text, where="a tool response", strict=False), depth + 1)
        except ValueError:
            pass
    if _NUMBER.fullmatch(text):
        try:
            return _Number(Decimal(text))
        except InvalidOperation:
            return text
    return text


def _text(text: str) -> str:
    return _SPACES.sub(" ", unicodedata.normalize("NFC", text)).strip()


def _shown(value) -> str:
    text = repr(value) if not isinstance(value, dict | list) else ("an object" if isinstance(value, dict) else "a list")
    return text if len(text) <= 80 else text[:77] + "..."


def _differences(left, right, path: str) -> list[str]:
    """Where the simulated facts (left) and the reference's (right) part, at most MAX_DIFFERENCES places."""
    found: list[str] = []

    def walk(a, b, where: str) -> None:
        if len(found) >= MAX_DIFFERENCES or a == b:
            return
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                here = f"{where}/{key.replace('~', '~0').replace('/', '~1')}"
                if key not in a:
                    found.append(f"{here}: missing from the simulated response")
                elif key not in b:
                    found.append(f"{here}: not in the reference's answer")
                else:
                    walk(a[key], b[key], here)
                if len(found) >= MAX_DIFFERENCES:
                    return
            return
        if isinstance(a, list) and isinstance(b, list):
            if len(a) != len(b):
                found.append(f"{where or '/'}: {len(a)} items simulated, {len(b)} in the reference")
            for i, (x, y) in enumerate(zip(a, b, strict=False)):
                walk(x, y, f"{where}/{i}")
            return
        found.append(f"{where or '/'}: simulated {_shown(a)}, reference {_shown(b)}")

    walk(left, right, path)
    return found
