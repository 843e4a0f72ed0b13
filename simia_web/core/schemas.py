"""JSON Schema checks for schemas that come from LLMs, uploads and editors.

jsonschema fetches a remote `$ref` over the network unless it is given a registry, so every schema is
validated against a registry of the JSON Schema metaschemas alone: a `$ref` resolves within its own
schema (or to a metaschema) or not at all.

A check's cost is bounded by construction, whoever wrote the schema (an upload, an editor, an LLM):

- `pattern` and `patternProperties` run on RE2, whose time is linear in the text; a pattern RE2 cannot run
  (backreferences, lookaround) makes the schema invalid.
- `uniqueItems`, `enum` and `const` compare canonical keys of the values (hashed once), instead of
  jsonschema's pairwise comparison (quadratic in the number of items under `uniqueItems`); their messages quote
  a few items and characters of a value, as do `not` and `oneOf`, whose messages quoted the whole subschema.
- Every keyword spends from a budget of steps: 1 plus the size of its value (not for `enum` and `const`,
  hashed once per check), plus the square of the array or object for `unevaluatedItems` and
  `unevaluatedProperties` (jsonschema's own check of those is quadratic).
  The budget is STEPS_BASE, and STEPS_PER_VALUE per value of the instance beyond that, so no schema can
  make a check grow faster than its instance (a `$ref` chain that doubles at each level, nested `anyOf`):
  a check over budget fails as one error (`validator == "budget"`). A `$ref` loop that never descends into
  the instance is a broken schema.
- `format` is an annotation (no format checker), as the 2020-12 specification has it.
"""

import contextvars
import functools
import itertools
import reprlib
from collections.abc import Iterator
from dataclasses import dataclass, field

import jsonschema
import re2
import referencing
import referencing.exceptions
import referencing.jsonschema
from jsonschema_specifications import REGISTRY as METASCHEMAS

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a refused pattern is reported by schema_error, not logged to stderr

ERROR_CHARS = 300  # of a validation message kept in an error (stored, shown, and fed back to LLMs)
ERRORS_KEPT = 50  # errors gathered from one check: enough to show, and the cost of messages stays bounded
STEPS_BASE = 100_000
STEPS_PER_VALUE = 16


# A value quoted in a message: a few items and characters of it, at a cost that does not grow with the value.
_clip = reprlib.Repr(maxlevel=3, maxtuple=8, maxlist=8, maxdict=8, maxset=8, maxstring=60, maxlong=40, maxother=60).repr


class CheckTooCostly(Exception):
    """Raised inside a check that spent its budget; entry points turn it into one error."""


@dataclass
class _Meter:
    instance: object
    left: int = STEPS_BASE
    grown: bool = False
    keys: dict = field(default_factory=dict)  # id(schema value) -> (value, its canonical key set), for enum/const

    def spend(self, steps: int) -> None:
        self.left -= steps
        if self.left >= 0:
            return
        if not self.grown:  # the instance is counted only for checks that need more than the base
            self.grown = True
            self.left += STEPS_PER_VALUE * _values_count(self.instance)
            if self.left >= 0:
                return
        raise CheckTooCostly


_meter: contextvars.ContextVar[_Meter | None] = contextvars.ContextVar("schema_check_meter", default=None)


def _values_count(value) -> int:
    count, stack = 0, [value]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, dict):
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return count


def json_key(value):
    """A hashable key equal for values JSON Schema calls equal: 1 and 1.0 alike, true and 1 not, objects
    whatever their key order."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, list):
        return ("array", tuple(json_key(item) for item in value))
    if isinstance(value, dict):
        return ("object", frozenset((key, json_key(item)) for key, item in value.items()))
    return value


def _schema_key(value, make):
    """make(value) for a value of the schema, computed once per check (the schema outlives the check)."""
    meter = _meter.get()
    cached = meter.keys.get(id(value)) if meter else None
    if cached is None:
        cached = (value, make(value))  # holding the value keeps its id from being reused during the check
        if meter:
            meter.keys[id(value)] = cached
    return cached[1]


def _keys_of(values: list) -> frozenset:
    return frozenset(json_key(value) for value in values)


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


def _unique_items(validator, unique, instance, schema):
    if not (unique and validator.is_type(instance, "array")):
        return
    seen: dict[object, int] = {}
    for index, item in enumerate(instance):
        first = seen.setdefault(json_key(item), index)
        if first != index:
            yield jsonschema.ValidationError(f"has non-unique elements: items {first} and {index} are equal")
            return


def _enum(validator, values, instance, schema):
    if json_key(instance) not in _schema_key(values, _keys_of):
        yield jsonschema.ValidationError(f"{_clip(instance)} is not one of {_clip(values)}")


def _const(validator, value, instance, schema):
    if json_key(instance) != _schema_key(value, json_key):
        yield jsonschema.ValidationError(f"{_clip(value)} was expected")


def _not(validator, not_schema, instance, schema):
    if validator.evolve(schema=not_schema).is_valid(instance):
        yield jsonschema.ValidationError(f"{_clip(instance)} should not be valid under {_clip(not_schema)}")


def _one_of(validator, one_of, instance, schema):
    subschemas = enumerate(one_of)
    all_errors = []
    for index, subschema in subschemas:
        errors = list(validator.descend(instance, subschema, schema_path=index))
        if not errors:
            first_valid = index
            break
        all_errors.extend(errors)
    else:
        yield jsonschema.ValidationError(
            f"{_clip(instance)} is not valid under any of the given schemas", context=all_errors
        )
        return
    more_valid = [str(i) for i, each in subschemas if validator.evolve(schema=each).is_valid(instance)]
    if more_valid:
        yield jsonschema.ValidationError(
            f"{_clip(instance)} is valid under each of subschemas {first_valid}, {', '.join(more_valid)}"
        )


_OWN = {
    "pattern": _pattern,
    "patternProperties": _pattern_properties,
    "uniqueItems": _unique_items,
    "enum": _enum,
    "const": _const,
    "not": _not,
    "oneOf": _one_of,
}
_HASHED = frozenset({"enum", "const"})  # their values are hashed once per check, not walked at each use
_QUADRATIC = frozenset({"unevaluatedItems", "unevaluatedProperties"})


def _metered(name: str, check):
    walks_value, quadratic = name not in _HASHED, name in _QUADRATIC

    def metered(validator, value, instance, schema):
        meter = _meter.get()
        if meter is not None:
            steps = 1 + (len(value) if walks_value and isinstance(value, list | dict) else 0)
            if quadratic and isinstance(instance, list | dict):
                steps += len(instance) ** 2
            meter.spend(steps)
        return check(validator, value, instance, schema)

    return metered


def _bounded(base):
    keywords = {**base.VALIDATORS, **_OWN}
    return jsonschema.validators.extend(base, validators={k: _metered(k, check) for k, check in keywords.items()})


Validator = _bounded(jsonschema.Draft202012Validator)
# What a broken schema raises while validating: an invalid keyword, or a `$ref` to nowhere.
SCHEMA_FAILURES = (jsonschema.exceptions.SchemaError, referencing.exceptions.Unresolvable)


def _checked(validator, instance, limit: int) -> list[jsonschema.ValidationError]:
    """Up to `limit` errors of `instance`, within the step budget (one `budget` error when it runs out)."""
    token = _meter.set(_Meter(instance))
    try:
        errors: list[jsonschema.ValidationError] = []
        try:
            errors.extend(itertools.islice(validator.iter_errors(instance), limit))
        except CheckTooCostly:
            errors.append(
                jsonschema.ValidationError(
                    f"checking against the schema takes more than {STEPS_BASE:,} steps plus {STEPS_PER_VALUE} per "
                    "value: it is refused (simplify the schema)",
                    validator="budget",
                )
            )
        except RecursionError:
            raise jsonschema.exceptions.SchemaError("a $ref refers back to itself without going deeper") from None
        return errors
    finally:
        _meter.reset(token)


def schema_errors(schema: dict, instance, *, limit: int = ERRORS_KEPT) -> list[jsonschema.ValidationError]:
    """Why `instance` fails `schema` (at most `limit` errors); raises one of SCHEMA_FAILURES for a broken schema."""
    return _checked(Validator(schema, registry=METASCHEMAS), instance, limit)


def first_error(schema: dict, instance) -> str | None:
    """The most relevant reason `instance` fails `schema`, with where it fails; None when it is valid."""
    error = jsonschema.exceptions.best_match(schema_errors(schema, instance))
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
    # Validator.check_schema, but with these keywords: it runs jsonschema's own class, whose uniqueItems is
    # quadratic on a `required` list that mixes strings and numbers.
    meta = Validator(Validator.META_SCHEMA, registry=METASCHEMAS, format_checker=Validator.FORMAT_CHECKER)
    for error in _checked(meta, schema, 1):
        return f"is not a valid JSON Schema: {error.message}"
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
