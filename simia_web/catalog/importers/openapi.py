"""OpenAPI 3 documents (JSON or YAML) → API specs: one API per operation.

Its parameters are the operation's path, query, header and cookie parameters and its JSON request body's
fields (the body as one `body` argument when its fields would clash with a parameter, or when an optional body
has required fields); `required` as the document says (a path parameter always), enums and every other
keyword kept, `$ref`s resolved. Its return schema is the first 2xx JSON response's. Reads (GET, HEAD, OPTIONS,
TRACE) are read-only APIs; POST, PUT, PATCH and DELETE change state. Every problem names the operation and the
field it is in."""

import datetime

import yaml
from django.conf import settings

from simia_web.catalog.validation import api_problems
from simia_web.core.json_input import JsonLimits, JsonRefused, value_check

from .errors import Collected, ImportIssue
from .names import is_api_name, snake_name
from .reading import bytes_read, json_read, text_decode
from .schemas import SchemaRefError, object_dereferenced, schema_resolved

METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
READ_METHODS = frozenset({"get", "head", "options", "trace"})
LOCATIONS = ("path", "query", "header", "cookie")
# Headers that OpenAPI says are described elsewhere (and ignored as parameters).
IGNORED_HEADERS = frozenset({"accept", "content-type", "authorization"})


def openapi_read(source, name: str) -> dict:
    """{"issues": [...], "apis": [specs with "provenance"]}."""
    try:
        document = _document_read(source, name)
    except Collected as exc:
        return {"issues": [exc.issue], "apis": []}
    issues: list[ImportIssue] = []
    if not isinstance(document, dict):
        return {"issues": [ImportIssue(name, None, "", "an OpenAPI document is a JSON or YAML object")], "apis": []}
    version = document.get("openapi")
    if not isinstance(version, str) or not version.startswith("3."):
        why = "is not an OpenAPI 3 document (Swagger 2.0 is not read: convert it to OpenAPI 3 first)"
        return {"issues": [ImportIssue(name, None, "openapi", f"{version!r} {why}")], "apis": []}
    paths = document.get("paths")
    if not isinstance(paths, dict) or not paths:
        return {"issues": [ImportIssue(name, None, "paths", "the document describes no operations")], "apis": []}
    reader = _Reader(document, name, legacy=version.startswith("3.0"))
    apis: list[dict] = []
    first_at: dict[str, str] = {}
    for path, item in paths.items():
        if not isinstance(item, dict):
            issues.append(ImportIssue(name, None, f"paths.{path}", "a path item must be an object"))
            continue
        try:
            item = reader.dereferenced(item, f"paths.{path}")
        except SchemaRefError as exc:
            issues.append(ImportIssue(name, None, exc.field, exc.message))
            continue
        for method in METHODS:
            if method not in item:
                continue
            where = f"paths.{path}.{method}"
            spec, problems = reader.operation(path, method, item[method], item.get("parameters") or [], where)
            issues += problems
            if spec is None:
                continue
            if spec["name"] in first_at:
                message = f"API name {spec['name']!r} is also the name of {first_at[spec['name']]} (set operationId)"
                issues.append(ImportIssue(name, None, f"{where}.operationId", message))
                continue
            first_at[spec["name"]] = f"{method.upper()} {path}"
            apis.append(spec)
    if not apis and not issues:
        issues.append(ImportIssue(name, None, "paths", "the document describes no operations"))
    return {"issues": issues, "apis": apis}


def _document_read(source, name: str):
    data = bytes_read(source, name)
    text = text_decode(data, name)
    if text.lstrip().startswith("{"):
        return json_read(data, name)
    return _yaml_read(text, name)


def _yaml_read(text: str, name: str):
    """A YAML document as JSON values. Aliases are refused (each repeats a whole subtree: a few lines of them
    expand to gigabytes), and the nesting and count of values are checked on the parser's events, before
    anything is built."""
    limits = JsonLimits.from_settings(max_bytes=settings.SIMIA_IMPORT_MAX_BYTES)
    depth = values = 0
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.AliasEvent):
                line = event.start_mark.line + 1 if event.start_mark else None
                raise Collected(ImportIssue(name, line, "", "YAML aliases (*name) are not accepted; write it out"))
            if isinstance(event, yaml.MappingStartEvent | yaml.SequenceStartEvent):
                depth += 1
                if depth > limits.max_depth:
                    line = event.start_mark.line + 1 if event.start_mark else None
                    raise Collected(ImportIssue(name, line, "", f"nested deeper than {limits.max_depth} levels"))
            elif isinstance(event, yaml.MappingEndEvent | yaml.SequenceEndEvent):
                depth -= 1
            values += isinstance(event, yaml.ScalarEvent | yaml.MappingStartEvent | yaml.SequenceStartEvent)
            if values > limits.max_values:
                raise Collected(ImportIssue(name, None, "", f"more than {limits.max_values:,} values"))
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        reason = getattr(exc, "problem", None) or str(exc)
        raise Collected(ImportIssue(name, line, "", f"neither JSON nor valid YAML: {reason}")) from None
    document = _json_values(document)
    try:
        value_check(document, where=name, limits=limits)
    except JsonRefused as exc:
        raise Collected(ImportIssue(name, None, exc.path, exc.message)) from None
    return document


def _json_values(value):
    """YAML's extras as JSON has them: keys as text (`200:` is a number to YAML), dates as ISO text."""
    if isinstance(value, dict):
        return {str(key): _json_values(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_values(item) for item in value]
    if isinstance(value, datetime.date | datetime.datetime):
        return value.isoformat()
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value


class _Reader:
    def __init__(self, document: dict, name: str, *, legacy: bool):
        self.document, self.name, self.legacy = document, name, legacy

    def dereferenced(self, node, field: str):
        return object_dereferenced(node, self.document, field)

    def schema(self, schema: dict, field: str, defs: dict) -> dict:
        """A schema whole (references resolved, in JSON Schema's dialect); definitions it keeps (a schema that
        contains itself) go to `defs`, for the root of the API's parameters."""
        resolved = schema_resolved(schema, self.document, field)
        if self.legacy:
            resolved = _from_openapi_30(resolved)
        if isinstance(resolved, dict) and "$defs" in resolved:
            resolved = dict(resolved)
            defs.update(resolved.pop("$defs"))
        return resolved

    def issue(self, field: str, message: str) -> ImportIssue:
        return ImportIssue(self.name, None, field, message)

    def operation(self, path: str, method: str, operation, shared: list, where: str):
        if not isinstance(operation, dict):
            return None, [self.issue(where, "an operation must be an object")]
        issues = []
        operation_id = operation.get("operationId")
        api_name = snake_name(operation_id if isinstance(operation_id, str) else f"{method} {path}")
        if not is_api_name(api_name):
            issues.append(self.issue(f"{where}.operationId", f"{operation_id!r} gives no usable API name"))
        properties: dict[str, dict] = {}
        required: list[str] = []
        defs: dict[str, dict] = {}
        for parameter_where, parameter in self._parameters(shared, operation.get("parameters") or [], where, issues):
            found = self._parameter(parameter, parameter_where, issues, defs)
            if found is None:
                continue
            key, schema, is_required = found
            properties[key] = schema
            if is_required:
                required.append(key)
        self._body(operation.get("requestBody"), f"{where}.requestBody", properties, required, issues, defs)
        returns = self._returns(operation.get("responses"), f"{where}.responses", issues)
        summary = " ".join(str(operation.get(k) or "").strip() for k in ("summary", "description")).strip()
        parameters = {"type": "object", "properties": properties, **({"required": required} if required else {})}
        if defs:
            parameters["$defs"] = defs
        spec = {
            "name": api_name,
            "description": summary or f"{method.upper()} {path}",
            "parameters": parameters,
            "returns": returns,
            "kind": "read" if method in READ_METHODS else "write",
            "provenance": {
                "import": "openapi",
                "operation": f"{method.upper()} {path}",
                **({"operation_id": operation_id} if isinstance(operation_id, str) else {}),
            },
        }
        issues += [self.issue(where, problem) for problem in api_problems(spec)]
        return (None if issues else spec), issues

    def _parameters(self, shared: list, own: list, where: str, issues: list):
        """The operation's parameters over the path's, by (name, in), each with the field it came from."""
        chosen = {}
        for source, items in ((where.rsplit(".", 1)[0], shared), (where, own)):
            if not isinstance(items, list):
                issues.append(self.issue(f"{source}.parameters", "must be a list"))
                continue
            for i, parameter in enumerate(items):
                field = f"{source}.parameters[{i}]"
                if not isinstance(parameter, dict):
                    issues.append(self.issue(field, "a parameter must be an object"))
                    continue
                try:
                    parameter = self.dereferenced(parameter, field)
                except SchemaRefError as exc:
                    issues.append(self.issue(exc.field, exc.message))
                    continue
                chosen[(parameter.get("name"), parameter.get("in"))] = (field, parameter)
        return list(chosen.values())

    def _parameter(self, parameter: dict, field: str, issues: list, defs: dict):
        name, location = parameter.get("name"), parameter.get("in")
        if not isinstance(name, str) or not name:
            issues.append(self.issue(f"{field}.name", "a parameter needs a name"))
            return None
        if location not in LOCATIONS:
            issues.append(self.issue(f"{field}.in", f"{location!r}: must be one of {', '.join(LOCATIONS)}"))
            return None
        if location == "header" and name.lower() in IGNORED_HEADERS:
            return None
        schema = parameter.get("schema")
        if schema is None and isinstance(parameter.get("content"), dict) and parameter["content"]:
            schema = next(iter(parameter["content"].values())).get("schema")
        if not isinstance(schema, dict):
            issues.append(self.issue(f"{field}.schema", f"parameter {name!r} has no schema"))
            return None
        try:
            schema = self.schema(schema, f"{field}.schema", defs)
        except SchemaRefError as exc:
            issues.append(self.issue(exc.field, exc.message))
            return None
        if parameter.get("description") and "description" not in schema:
            schema = {**schema, "description": str(parameter["description"])}
        return name, schema, location == "path" or parameter.get("required") is True

    def _body(self, body, field: str, properties: dict, required: list, issues: list, defs: dict) -> None:
        if body is None:
            return
        try:
            body = self.dereferenced(body, field)
        except SchemaRefError as exc:
            issues.append(self.issue(exc.field, exc.message))
            return
        content = body.get("content") if isinstance(body, dict) else None
        if not isinstance(content, dict) or not content:
            issues.append(self.issue(f"{field}.content", "a request body needs content"))
            return
        media = _json_media(content) or next(iter(content))
        schema = (content[media] or {}).get("schema") if isinstance(content[media], dict) else None
        if not isinstance(schema, dict):
            issues.append(self.issue(f"{field}.content.{media}.schema", "the request body has no schema"))
            return
        try:
            schema = self.schema(schema, f"{field}.content.{media}.schema", defs)
        except SchemaRefError as exc:
            issues.append(self.issue(exc.field, exc.message))
            return
        body_required = body.get("required") is True
        fields = schema.get("properties") if isinstance(schema.get("properties"), dict) else None
        fields_required = [r for r in schema.get("required") or [] if isinstance(r, str)]
        if fields is not None and not (set(fields) & set(properties)) and (body_required or not fields_required):
            properties.update(fields)
            required += fields_required
            return
        properties["body"] = schema
        if body_required:
            required.append("body")

    def _returns(self, responses, field: str, issues: list) -> dict:
        if responses is None:
            return {}
        if not isinstance(responses, dict):
            issues.append(self.issue(field, "must be an object"))
            return {}
        for code in sorted(str(c) for c in responses):
            if not (code.startswith("2") or code == "default"):
                continue
            try:
                response = self.dereferenced(responses[code], f"{field}.{code}")
                content = response.get("content") if isinstance(response, dict) else None
                media = _json_media(content) if isinstance(content, dict) else None
                body = content.get(media) if media and isinstance(content, dict) else None
                schema = body.get("schema") if isinstance(body, dict) else None
                if isinstance(schema, dict):
                    defs: dict[str, dict] = {}
                    returns = self.schema(schema, f"{field}.{code}.content.{media}.schema", defs)
                    return {**returns, "$defs": defs} if defs else returns
            except SchemaRefError as exc:
                issues.append(self.issue(exc.field, exc.message))
                return {}
        return {}


def _json_media(content: dict) -> str | None:
    for media in content:
        base = str(media).split(";", 1)[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return media
    return None


SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
SCHEMA_ONE = ("items", "additionalProperties", "not", "contains", "if", "then", "else", "propertyNames")


def _from_openapi_30(schema):
    """OpenAPI 3.0's schema dialect as JSON Schema: `nullable` as a "null" type (and a null in the enum), boolean
    exclusive bounds as numbers. Only schemas are rewritten: examples, enums and defaults are values."""
    if not isinstance(schema, dict):
        return schema
    out = dict(schema)
    for key in SCHEMA_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _from_openapi_30(sub) for name, sub in out[key].items()}
    for key in SCHEMA_LISTS:
        if isinstance(out.get(key), list):
            out[key] = [_from_openapi_30(sub) for sub in out[key]]
    for key in SCHEMA_ONE:
        if key in out:
            value = out[key]
            out[key] = [_from_openapi_30(s) for s in value] if isinstance(value, list) else _from_openapi_30(value)
    if out.pop("nullable", None) is True:
        if isinstance(out.get("type"), str):
            out["type"] = [out["type"], "null"]
        if isinstance(out.get("enum"), list) and None not in out["enum"]:
            out["enum"] = [*out["enum"], None]
    for bound, exclusive in (("minimum", "exclusiveMinimum"), ("maximum", "exclusiveMaximum")):
        if isinstance(out.get(exclusive), bool) and out.pop(exclusive) and bound in out:
            out[exclusive] = out.pop(bound)
    return out
