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
