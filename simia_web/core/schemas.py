"""JSON Schema checks for schemas that come from LLMs, uploads and editors.

jsonschema fetches a remote `$ref` over the network unless it is given a registry, so every schema is
validated with an empty one: a `$ref` resolves within its own schema or not at all.
"""

from collections.abc import Iterator

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema

Validator = jsonschema.Draft202012Validator
_LOCAL_ONLY = referencing.Registry()
# What a broken schema raises while validating: an invalid keyword, or a `$ref` to nowhere.
SCHEMA_FAILURES = (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable)
_DATA_KEYWORDS = {"const", "enum", "default", "examples"}  # their values are instances, not schemas


def schema_validator(schema: dict) -> jsonschema.protocols.Validator:
    return Validator(schema, registry=_LOCAL_ONLY)


def first_error(schema: dict, instance) -> str | None:
    """The most relevant reason `instance` fails `schema`, with where it fails; None when it is valid."""
    error = jsonschema.exceptions.best_match(schema_validator(schema).iter_errors(instance))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"


def schema_error(schema) -> str | None:
    """Why `schema` cannot be used to validate anything (metaschema, or a `$ref` that does not resolve)."""
    if not isinstance(schema, dict):
        return "must be a JSON object"
    try:
        Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    resolver = _LOCAL_ONLY.resolver_with_root(referencing.jsonschema.DRAFT202012.create_resource(schema))
    for ref in _refs(schema):
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            return f"has a $ref that does not resolve within the schema: {ref!r}"
    return None


def _refs(node) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in ("$ref", "$dynamicRef") and isinstance(value, str):
                yield value
            elif key not in _DATA_KEYWORDS:
                yield from _refs(value)
    elif isinstance(node, list):
        for item in node:
            yield from _refs(item)
