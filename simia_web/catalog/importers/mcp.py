"""An MCP server's tools (`tools/list`) → API specs.

A tool's input schema is its parameters (`$ref`s into its `$defs` resolved) and its output schema, when it
declares one, its return schema. It is read-only when its annotations say so (`readOnlyHint`); otherwise it
may change state, as the protocol's default says. Names become snake_case; the tool's own name is kept in
the API's provenance, and calls to the server use it."""

from simia_web.catalog.mcp import McpServer, McpSession, McpUnavailable
from simia_web.catalog.validation import api_problems

from .errors import ImportIssue
from .names import is_api_name, snake_name
from .schemas import SchemaRefError, schema_resolved


def mcp_read(server: McpServer) -> dict:
    """{"issues": [...], "apis": [specs with "provenance"]} from a session with the server."""
    source = server.describe()
    try:
        with McpSession(server) as session:
            tools = session.tools()
    except McpUnavailable as exc:
        return {"issues": [ImportIssue(source, None, "", str(exc))], "apis": []}
    if not tools:
        return {"issues": [ImportIssue(source, None, "tools", "the server lists no tools")], "apis": []}
    issues: list[ImportIssue] = []
    apis: list[dict] = []
    first: dict[str, str] = {}
    for i, tool in enumerate(tools):
        spec, problems = mcp_tool_spec(tool, source=source, field=f"tools[{i}]")
        issues += problems
        if spec is None:
            continue
        if spec["name"] in first:
            message = f"tools {first[spec['name']]!r} and {tool['name']!r} both become the API {spec['name']!r}"
            issues.append(ImportIssue(source, None, f"tools[{i}].name", message))
            continue
        first[spec["name"]] = tool["name"]
        apis.append(spec)
    return {"issues": issues, "apis": apis}


def mcp_tool_spec(tool: dict, *, source: str, field: str) -> tuple[dict | None, list[ImportIssue]]:
    tool_name = str(tool.get("name", ""))
    api_name = snake_name(tool_name)
    where = f"{field} ({tool_name})" if tool_name else field
    issues = []
    if not is_api_name(api_name):
        issues.append(ImportIssue(source, None, f"{where}.name", f"{tool_name!r} gives no usable API name"))
    try:
        parameters = schema_resolved(tool.get("inputSchema") or {}, tool.get("inputSchema") or {}, "inputSchema")
        output = tool.get("outputSchema") or {}
        returns = schema_resolved(output, output, "outputSchema") if output else {}
    except SchemaRefError as exc:
        return None, [ImportIssue(source, None, f"{where}.{exc.field}", exc.message)]
    annotations = tool.get("annotations") or {}
    spec = {
        "name": api_name,
        "description": str(tool.get("description") or annotations.get("title") or tool.get("title") or tool_name),
        "parameters": {"type": "object", **parameters},
        "returns": returns,
        "kind": "read" if annotations.get("readOnlyHint") is True else "write",
        "provenance": {"import": "mcp", "tool": tool_name, "server": source},
    }
    issues += [ImportIssue(source, None, where, problem) for problem in api_problems(spec)]
    return (None if issues else spec), issues
