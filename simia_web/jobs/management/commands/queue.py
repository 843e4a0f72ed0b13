"""`manage.py queue KIND --param NAME=VALUE ... [--wait]`: queue a job of any registered kind, as the queue pages
and `POST /api/v1/jobs/` do."""

from argparse import RawDescriptionHelpFormatter

from django.core.management.base import BaseCommand, CommandError, DjangoHelpFormatter

from simia_web.accounts.scoping import command_workspace
from simia_web.core.errors import ValidationFailed, fields_said
from simia_web.jobs.cli import job_wait, kinds_described, parameters_from_pairs
from simia_web.jobs.kinds import job_kinds_queueable
from simia_web.jobs.services import job_queue


class HelpFormatter(DjangoHelpFormatter, RawDescriptionHelpFormatter):
    """Django's order of options, and the kinds' list below them as it is laid out."""


class Command(BaseCommand):
    help = (
        "Queue a job of any registered kind: manage.py queue KIND --param NAME=VALUE ... [--wait].\n"
        "Its parameters are checked as its queue page and POST /api/v1/jobs/ check them."
    )

    def create_parser(self, prog_name, subcommand, **kwargs):
        kwargs.update(formatter_class=HelpFormatter, epilog=kinds_described())
        return super().create_parser(prog_name, subcommand, **kwargs)

    def add_arguments(self, parser):
        parser.add_argument("kind", metavar="KIND", choices=list(job_kinds_queueable()), help="The job kind (below).")
        parser.add_argument(
            "--param",
            action="append",
            default=[],
            dest="pairs",
            metavar="NAME=VALUE",
            help="A parameter of the kind; repeat for more (unset ones take their defaults).",
        )
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")
        parser.add_argument(
            "--workspace",
            metavar="SLUG",
            help="The workspace the job works in: its domains are looked up there (default: default).",
        )

    def handle(self, *args, kind: str, pairs: list[str], wait: bool, workspace: str | None, **options):
        try:
            params = parameters_from_pairs(job_kinds_queueable()[kind], pairs)
            job = job_queue(kind=kind, params=params, workspace=command_workspace(workspace))
        except ValidationFailed as exc:
            raise CommandError(fields_said(exc.errors)) from exc
        self.stdout.write(f"Queued job {job.pk} ({job.kind}). Follow it at /jobs/{job.pk}/ or with --wait.")
        if wait:
            job_wait(job, self.stdout)
