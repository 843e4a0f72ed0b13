"""JSON Schema checks for schemas that come from LLMs, uploads and editors.

jsonschema fetches a remote `$ref` over the network unless it is given a registry, so every schema is
validated against a registry of the JSON Schema metaschemas alone: a `$ref` resolves within its own
schema (or to a metaschema) or not at all.

`pattern` and `patternProperties` run on RE2, whose time is linear in the text: a schema's author (an upload,
an editor, an LLM) cannot make a tool call's arguments take exponential time to check. A pattern RE2 cannot
run (backreferences, lookaround) makes the schema invalid.
"""

import functools
from collections.abc import Iterator

import jsonschema
import re2
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as METASCHEMAS

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is reported by schema_error, not logged to stderr


@functools.lru_cache(maxsize=1024)
def _regex(pattern: str):
    try:
        return re2.compile(pattern, _RE2_OPTIONS)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise jsonschema.exceptions.SchemaError(f"pattern {pattern!r} cannot run in linear time: {why}") from None


def _pattern(validator, pattern, instance, schema):
    if validator.is_type(instance, "string") and not _regex(pattern).search(instance):
        shown = instance if len(instance) <= 80 else f"{instance[:80]}…"
        yield jsonschema.ValidationError(f"{shown!r} does not match {pattern!r}")


def _pattern_properties(validator, pattern_properties, instance, schema):
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        regex = _regex(pattern)
        for key, value in instance.items():
            if regex.search(key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


Validator = jsonschema.validators.extend(
    jsonschema.Draft202012Validator, validators={"pattern": _pattern, "patternProperties": _pattern_properties}
)
# What a broken schema raises while validating: an invalid keyword, or a `$ref` to nowhere.
ERROR_CHARS = 300  # of a validation message kept in an error (stored, shown, and fed back to LLMs)
SCHEMA_FAILURES = (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable)


def schema_validator(schema: dict) -> jsonschema.protocols.Validator:
    return Validator(schema, registry=METASCHEMAS)


def first_error(schema: dict, instance) -> str | None:
    """The most relevant reason `instance` fails `schema`, with where it fails; None when it is valid."""
    error = jsonschema.exceptions.best_match(schema_validator(schema).iter_errors(instance))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    message = error.message  # it quotes the instance, however big (a whole world state)
    if len(message) > ERROR_CHARS:
        message = f"{message[:ERROR_CHARS]}… [{len(message) - ERROR_CHARS} characters cut]"
    return f"at {where}: {message}"


def schema_error(schema) -> str | None:
    """Why `schema` cannot be used to validate anything (metaschema, or a `$ref` that does not resolve)."""
    if not isinstance(schema, dict):
        return "must be a JSON object"
    try:
        Validator.check_schema(schema)
    except jsonschema.exceptions.SchemaError as exc:
        return f"is not a valid JSON Schema: {exc.message}"
    root = referencing.jsonschema.DRAFT202012.create_resource(schema)
    for pattern in _patterns(root):
        try:
            _regex(pattern)
        except jsonschema.exceptions.SchemaError as exc:
            return f"is not usable: {exc.message}"
    for ref in _unresolvable_refs(root, METASCHEMAS.resolver_with_root(root)):
        return f"has a $ref that does not resolve within the schema: {ref!r}"
    return None


def _patterns(resource: referencing.Resource) -> Iterator[str]:
    """Every `pattern` and `patternProperties` key of the schema's subschemas."""
    if isinstance(resource.contents, dict):
        if isinstance(resource.contents.get("pattern"), str):
            yield resource.contents["pattern"]
        if isinstance(resource.contents.get("patternProperties"), dict):
            yield from resource.contents["patternProperties"]
    for subresource in resource.subresources():
        yield from _patterns(subresource)


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
