"""Canonical JSON for content hashes (the same value always gives the same bytes), and compact JSON for prompts."""

import hashlib
import json
from typing import Any

import orjson


def canonical_bytes(value: Any) -> bytes:
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)


def content_hash(value: Any) -> str:
    return hashlib.sha256(canonical_bytes(value)).hexdigest()


def compact_json(value: Any) -> str:
    """JSON for prompts: no indentation or spaces after separators (they cost tokens and say nothing)."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
