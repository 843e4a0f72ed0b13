from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.scoping import command_workspace
from simia_web.catalog.importers import FORMATS, ImportRejected, seeds_import
from simia_web.core.errors import ValidationFailed


class Command(BaseCommand):
    help = "Import a τ²-bench domain folder (or .zip), or a ShareGPT / OpenAI chat JSON or JSONL file of seeds."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", choices=FORMATS, help="Default: tau2 for a folder or .zip; needed for a file.")
        parser.add_argument("--domain", help="Domain to import into (default: the folder or file name).")
        parser.add_argument("--workspace", metavar="SLUG", help="The workspace the domain is in (default: default).")

    def handle(self, *args, **opts):
        path, format = opts["path"], opts["format"]
        if format is None:
            if not (path.is_dir() or path.suffix.lower() == ".zip"):
                raise CommandError(
                    f"{path}: a seed file needs --format ({' or '.join(f for f in FORMATS if f != 'tau2')})"
                )
            format = "tau2"
        try:
            workspace = command_workspace(opts["workspace"])
        except ValidationFailed as exc:
            raise CommandError(exc.detail) from exc
        try:
            result = seeds_import(source=path, format=format, domain=opts["domain"], workspace_id=workspace.pk)
        except ImportRejected as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(result))
