"""The conversation's one owner: the canonical shape and its normalisers (conversation), the rules over
it (rules) and one module per outside format holding both directions and its validator (openai,
sharegpt, tau2).

Pure functions over dicts: no database. Malformed input raises FormatError naming the field.
"""

from .errors import FormatError

__all__ = ["FormatError"]
