from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.scoping import command_workspace
from simia_web.catalog.importers import ImportRejected, apis_import
from simia_web.catalog.mcp import McpServer
from simia_web.core.errors import ValidationFailed


class Command(BaseCommand):
    help = (
        "Import a domain's APIs from an MCP server (its tools/list, over stdio or streamable HTTP) or from an "
        "OpenAPI 3 document (JSON or YAML). Nothing is written unless every API is valid."
    )

    def add_arguments(self, parser):
        parser.add_argument("--domain", required=True, help="The domain to import into (created when new).")
        parser.add_argument("--workspace", metavar="SLUG", help="The workspace the domain is in (default: default).")
        source = parser.add_mutually_exclusive_group(required=True)
        source.add_argument("--mcp", metavar="COMMAND", help='An MCP server to run over stdio, e.g. "mcp-server-time".')
        source.add_argument("--mcp-url", metavar="URL", help="A streamable-HTTP MCP server, e.g. http://host:8000/mcp.")
        source.add_argument("--openapi", metavar="FILE", type=Path, help="An OpenAPI 3 document.")

    def handle(self, *args, **opts):
        server = McpServer(command=opts["mcp"] or "", url=opts["mcp_url"] or "")
        try:
            workspace = command_workspace(opts["workspace"])
        except ValidationFailed as exc:
            raise CommandError(exc.detail) from exc
        try:
            result = apis_import(
                domain=opts["domain"],
                openapi=opts["openapi"],
                mcp=server if opts["openapi"] is None else None,
                workspace_id=workspace.pk,
            )
        except ImportRejected as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(result))
