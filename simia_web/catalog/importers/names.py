"""API names from the names other systems give their operations and tools ("getOrderById", "orders.list",
"get-current-time"): snake_case, as the catalog's APIs are named."""

import re

from simia_web.catalog.validation import SNAKE_CASE

MAX_NAME = 64


def snake_name(text: str) -> str:
    """`text` in snake_case ("" when nothing of it is left): camelCase split, other characters to underscores."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", text))
    name = re.sub(r"[^a-z0-9]+", "_", words.lower()).strip("_")
    if name and not name[0].isalpha():
        name = f"op_{name}"
    return name[:MAX_NAME].rstrip("_")


def is_api_name(name: str) -> bool:
    return bool(SNAKE_CASE.match(name))
