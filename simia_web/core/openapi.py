"""OpenAPI schema hooks: the input limits the API enforces are stated in its schema, so clients (and the fuzz
suite) know them."""

from django.conf import settings


def query_limits(result, generator, request, public):
    """Every string query parameter gets SIMIA_QUERY_MAX_LENGTH as its maxLength (BoundedFilterBackend's rule)."""
    limit = settings.SIMIA_QUERY_MAX_LENGTH
    for path in result.get("paths", {}).values():
        for operation in path.values():
            for parameter in operation.get("parameters", []) if isinstance(operation, dict) else []:
                schema = parameter.get("schema", {})
                if parameter.get("in") == "query" and schema.get("type") == "string":
                    schema["maxLength"] = min(schema.get("maxLength", limit), limit)
    return result


# The error answers every endpoint can give, documented on each operation so clients (and schema checks) expect
# them: (schema, description) per status code.
_ERROR = {"$ref": "#/components/schemas/Error"}
ERROR_RESPONSES = {
    "400": ({"type": "object", "additionalProperties": {}}, "Invalid parameters or body: {field: [messages]}."),
    "401": (_ERROR, "No credentials, or a bad token."),
    "403": (_ERROR, "Your role does not allow this."),
    "404": (_ERROR, "No such object (or an invalid pagination cursor)."),
}


def error_responses(result, generator, request, public):
    """Every operation documents the error answers of ERROR_RESPONSES it does not document itself."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault(
        "Error", {"type": "object", "properties": {"detail": {"type": "string"}}, "required": ["detail"]}
    )
    for path in result.get("paths", {}).values():
        for operation in path.values():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            for code, (schema, description) in ERROR_RESPONSES.items():
                operation["responses"].setdefault(
                    code, {"content": {"application/json": {"schema": schema}}, "description": description}
                )
    return result
