"""`manage.py fidelity DOMAIN`: set a domain's reference environment if asked, queue a fidelity run against it
and wait for its figures."""

import json

from django.core.exceptions import PermissionDenied
from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.scoping import command_workspace
from simia_web.catalog.models import Domain
from simia_web.catalog.references import ReferenceConfig, reference_set
from simia_web.core.errors import ValidationFailed, fields_said
from simia_web.fidelity.models import FidelityRun
from simia_web.fidelity.services import FIDELITY
from simia_web.jobs.cli import job_wait
from simia_web.jobs.services import job_queue


class Command(BaseCommand):
    help = (
        "Measure a domain's simulator against its reference environment (an MCP server): replay the tool calls of "
        "its trajectories, each trajectory in a fresh session, compare every simulated response with the "
        "reference's answer, and print the report (JSON) last. A reference given here is remembered on the domain."
    )

    def add_arguments(self, parser):
        parser.add_argument("--domain", required=True)
        parser.add_argument("--workspace", metavar="SLUG", help="The workspace the domain is in (default: default).")
        server = parser.add_mutually_exclusive_group()
        server.add_argument("--mcp", metavar="COMMAND", help="The reference, run over stdio.")
        server.add_argument("--mcp-url", metavar="URL", help="The reference, a streamable-HTTP MCP server.")
        parser.add_argument("--reset-tool", default="", help="A tool called at the start of every session.")
        parser.add_argument(
            "--response-pointer", default="", help="A JSON Pointer to the API's response inside each tool answer."
        )
        parser.add_argument("--limit", type=int, help="Only the first N trajectories with tool calls.")

    def handle(self, *args, **opts):
        try:
            workspace = command_workspace(opts["workspace"])
        except ValidationFailed as exc:
            raise CommandError(exc.detail) from exc
        domain = Domain.objects.filter(name=opts["domain"], workspace=workspace).first()
        if domain is None:
            raise CommandError(f"no domain named {opts['domain']!r}")
        if opts["mcp"] or opts["mcp_url"]:
            config = ReferenceConfig(
                command=opts["mcp"] or "",
                url=opts["mcp_url"] or "",
                reset_tool=opts["reset_tool"],
                response_pointer=opts["response_pointer"],
            )
            try:
                reference_set(domain=domain, config=config)
            except (ValidationFailed, PermissionDenied) as exc:
                raise CommandError(f"reference refused: {exc}") from exc
            self.stdout.write(f"The reference of {domain.name} is now the MCP server at {config.describe()}.")
        params = {"domain": domain.name, "limit": opts["limit"]}
        try:
            job = job_queue(kind=FIDELITY, params=params, workspace=workspace)
        except ValidationFailed as exc:
            raise CommandError(fields_said(exc.errors)) from exc
        self.stdout.write(f"Queued job {job.pk} ({job.kind}). Follow it at /jobs/{job.pk}/.")
        job_wait(job, self.stdout)
        run = FidelityRun.objects.get(job=job)
        self.stdout.write(json.dumps(run.summary, indent=2, ensure_ascii=False))
