"""Converters between outside trajectory formats and the canonical one (OpenAI chat messages + tools).

Pure functions over dicts: no database. Malformed input raises FormatError naming the field.
"""

from .errors import FormatError
from .openai import canonical_to_openai, openai_record_to_canonical
from .sharegpt import canonical_to_sharegpt, sharegpt_problems, sharegpt_record_to_canonical

__all__ = [
    "FormatError",
    "canonical_to_openai",
    "canonical_to_sharegpt",
    "openai_record_to_canonical",
    "sharegpt_problems",
    "sharegpt_record_to_canonical",
]
