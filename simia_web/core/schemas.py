"""JSON Schema checks for schemas that come from LLMs, uploads and editors.

jsonschema fetches a remote `$ref` over the network unless it is given a registry, so every schema is
validated against a registry of the JSON Schema metaschemas alone: a `$ref` resolves within its own
schema (or to a metaschema) or not at all.
"""

from collections.abc import Iterator

import jsonschema
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as METASCHEMAS

Validator = jsonschema.Draft202012Validator
# What a broken schema raises while validating: an invalid keyword, or a `$ref` to nowhere.
SCHEMA_FAILURES = (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable)


def schema_validator(schema: dict) -> jsonschema.protocols.Validator:
    return Validator(schema, registry=METASCHEMAS)


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
    root = referencing.jsonschema.DRAFT202012.create_resource(schema)
    for ref in _unresolvable_refs(root, METASCHEMAS.resolver_with_root(root)):
        return f"has a $ref that does not resolve within the schema: {ref!r}"
    return None


def _unresolvable_refs(resource: referencing.Resource, resolver) -> Iterator[str]:
    """Walks the schema's subschemas as the specification defines them (so `$id` scopes apply, and
    instance values such as `default` or `enum` are not taken for schemas)."""
    resolver = resolver.in_subresource(resource)
    if isinstance(resource.contents, dict):
        for keyword in ("$ref", "$dynamicRef"):
            ref = resource.contents.get(keyword)
            if isinstance(ref, str):
                try:
                    resolver.lookup(ref)
                except referencing.exceptions.Unresolvable:
                    yield ref
    for subresource in resource.subresources():
        yield from _unresolvable_refs(subresource, resolver)
