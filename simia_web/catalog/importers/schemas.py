"""Tool schemas made whole: every `$ref` into the document (OpenAPI components, an MCP tool's `$defs`) replaced
by what it points at, so each API's parameters and returns stand alone, as the agent, the simulator and the
argument checks read them. A schema that refers to itself (a tree of categories) keeps that one reference,
as `#/$defs/<name>` within its own schema. Expansion is bounded: a document whose references multiply (each
used twice, thirty levels deep) is refused, not expanded."""

import re
from urllib.parse import unquote

MAX_NODES = 20_000  # objects and arrays in one expanded schema
MAX_DEPTH = 128  # nesting of one expanded schema


class SchemaRefError(Exception):
    def __init__(self, field: str, message: str):
        self.field, self.message = field, message
        super().__init__(f"{field}: {message}")


def _pointer_get(document, ref: str, field: str):
    node = document
    for raw in ref[2:].split("/") if ref != "#" else []:
        key = unquote(raw).replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and key in node:
            node = node[key]
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            raise SchemaRefError(field, f"$ref {ref!r} points at nothing in the document")
    return node


def object_dereferenced(node, document, field: str, hops: int = 8):
    """An OpenAPI object that may be a `$ref` (a parameter, a request body, a response), followed to what it
    stands for: its own schemas are resolved on their own, so that each keeps its definitions at its root."""
    while isinstance(node, dict) and "$ref" in node and hops:
        ref = node["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaRefError(field, f"$ref {ref!r}: only references inside the document are followed")
        node, hops = _pointer_get(document, ref, field), hops - 1
    if isinstance(node, dict) and "$ref" in node:
        raise SchemaRefError(field, "$ref chain too long (or a loop)")
    return node


def _def_name(ref: str, taken: dict) -> str:
    base = re.sub(r"[^A-Za-z0-9_.-]", "_", ref.rsplit("/", 1)[-1]) or "schema"
    name, n = base, 1
    while name in taken and taken[name] != ref:
        n += 1
        name = f"{base}_{n}"
    return name


def schema_resolved(schema, document, field: str):
    """`schema` with its `$ref`s resolved against `document`; SchemaRefError names the field and the reference.

    Keywords beside a `$ref` (a description, OpenAPI 3.1 allows them) are kept over the target's."""
    defs: dict[str, object] = {}
    names: dict[str, str] = {}  # def name -> the ref it stands for
    nodes = 0

    def walk(node, stack: tuple[str, ...], where: str, depth: int = 0):
        nonlocal nodes
        if not isinstance(node, dict | list):
            return node
        nodes += 1
        if nodes > MAX_NODES:
            raise SchemaRefError(field, f"the schema expands to more than {MAX_NODES:,} objects and arrays")
        if depth > MAX_DEPTH:
            raise SchemaRefError(field, f"the schema expands to more than {MAX_DEPTH} levels")
        if isinstance(node, list):
            return [walk(item, stack, f"{where}[{i}]", depth + 1) for i, item in enumerate(node)]
        ref = node.get("$ref")
        if ref is None:
            return {key: walk(value, stack, f"{where}.{key}", depth + 1) for key, value in node.items()}
        if not isinstance(ref, str) or not ref.startswith("#"):
            raise SchemaRefError(where, f"$ref {ref!r}: only references inside the document are followed")
        siblings = {k: walk(value, stack, f"{where}.{k}", depth + 1) for k, value in node.items() if k != "$ref"}
        if ref in stack:  # a schema that contains itself: kept as one definition that refers to itself
            name = _def_name(ref, names)
            if name not in names:
                names[name] = ref
                defs[name] = None  # being filled: inner references to it stop here
                defs[name] = walk(_pointer_get(document, ref, where), (ref,), f"{where}($ref {ref})", depth + 1)
            return {"$ref": f"#/$defs/{name}", **siblings}
        target = walk(_pointer_get(document, ref, where), (*stack, ref), f"{where}($ref {ref})", depth + 1)
        if not isinstance(target, dict):
            raise SchemaRefError(where, f"$ref {ref!r} points at a {type(target).__name__}, not a schema")
        return {**target, **siblings}

    resolved = walk(schema, (), field)
    if defs and isinstance(resolved, dict):
        resolved = {**resolved, "$defs": {**resolved.get("$defs", {}), **defs}}
    if isinstance(resolved, dict) and "$defs" in resolved and not defs:
        resolved = {key: value for key, value in resolved.items() if key != "$defs"}  # every use was inlined
    return resolved
