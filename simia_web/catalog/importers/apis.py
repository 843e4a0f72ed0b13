"""Importing a domain's APIs from an OpenAPI 3 document or an MCP server: all or nothing, like every import.

The specs are read and checked first; only when none has a problem does one transaction create the domain
(when new) and the APIs it does not have yet (an API with the same name is kept as it is: importing again
creates nothing)."""

from django.db import transaction

from simia_web.catalog.mcp import McpServer, mcp_command_check, mcp_server_problems
from simia_web.catalog.models import DomainSource
from simia_web.catalog.services import domain_ensure
from simia_web.core.services import audit_record

from .errors import ImportIssue, ImportRejected
from .mcp import mcp_read
from .openapi import openapi_read
from .service import ImportResult, apis_add, domain_name_issues, source_name

API_FORMATS = ("openapi", "mcp")


def apis_import(
    *, domain: str, openapi=None, mcp: McpServer | None = None, workspace_id: int | None = None, actor=None
) -> ImportResult:
    """Import APIs into the domain `domain` of the workspace `workspace_id` (the `default` one when None) from an
    OpenAPI document (a Path or an uploaded file) or an MCP server.

    Raises ImportRejected (nothing written) naming the file or server, the operation or tool and the field;
    PermissionDenied when `actor` may not run the server's command."""
    if (openapi is None) == (mcp is None):
        raise ImportRejected([ImportIssue("", None, "source", "give an OpenAPI document or an MCP server")])
    source = mcp.describe() if mcp is not None else source_name(openapi)
    issues = _domain_issues(domain, source, workspace_id)
    if mcp is not None:
        mcp_command_check(mcp, actor)
        problems = mcp_server_problems(mcp)
        issues += [ImportIssue(source, None, field, message) for field, message in problems.items()]
    if issues:
        raise ImportRejected(issues)
    data = mcp_read(mcp) if mcp is not None else openapi_read(openapi, source)
    if data["issues"]:
        raise ImportRejected(data["issues"])
    format = "openapi" if openapi is not None else "mcp"
    result = ImportResult(domain=domain, format=format)
    with transaction.atomic():
        target = domain_ensure(name=domain, source=DomainSource(format), workspace_id=workspace_id, actor=actor)
        apis_add(target, data["apis"], result, actor, {"import": format})
        if not target.initial_state:
            result.notes.append("the domain has no world state yet: the simulator starts from an empty one")
        data = {"source": source, **result.as_dict()}
        audit_record(actor=actor, action="catalog.import_apis", target=target, data=data)
    return result


def _domain_issues(domain: str, source: str, workspace_id: int | None) -> list[ImportIssue]:
    if not domain:
        return [ImportIssue(source, None, "domain", "name the domain to import into")]
    return domain_name_issues(domain, source, workspace_id)
