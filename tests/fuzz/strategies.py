"""Hostile JSON for the fuzz tests: deep nesting, huge and non-finite numbers, long and odd unicode (NUL,
lone surrogates escaped), many keys, and text that is not JSON at all."""

import json

from hypothesis import strategies as st

_scalars = (
    st.none()
    | st.booleans()
    | st.integers()  # unbounded: 2**70 and 5000-digit integers come up
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.text(max_size=200)  # any code point, NUL included
)
values = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(st.text(max_size=12), children, max_size=6),
    max_leaves=40,
)


def _dumps(value) -> str:
    return json.dumps(value, allow_nan=True)  # NaN and Infinity written as the bare words


deep = st.integers(min_value=60, max_value=200_000).flatmap(
    lambda depth: st.sampled_from([("[" * depth + "]" * depth), ('{"a":' * depth + "1" + "}" * depth)])
)
big_numbers = st.sampled_from(["1" * 5000, str(2**70), str(-(2**64)), "1e999", "-1e999", "NaN", "Infinity"])
wide = st.integers(min_value=1, max_value=60_000).map(lambda n: "{" + ",".join(f'"k{i}":{i}' for i in range(n)) + "}")
garbage = st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1"))

# One JSON document (or something pretending to be one).
documents = values.map(_dumps) | deep | big_numbers | wide | garbage


def embedded(document: str) -> str:
    """`document` placed inside an otherwise plausible object, so it passes the outer shape checks."""
    return '{"messages": [{"role": "user", "content": "hi", "extra": ' + document + "}]}"


hostile_texts = documents | documents.map(embedded)
