from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from simia_web.catalog.importers import FORMATS, ImportRejected, seeds_import


class Command(BaseCommand):
    help = "Import a τ²-bench domain folder (or .zip), or a ShareGPT / OpenAI chat JSON or JSONL file of seeds."

    def add_arguments(self, parser):
        parser.add_argument("path", type=Path)
        parser.add_argument("--format", required=True, choices=FORMATS)
        parser.add_argument("--domain", help="Domain to import into (default: the folder or file name).")

    def handle(self, *args, **opts):
        try:
            result = seeds_import(source=opts["path"], format=opts["format"], domain=opts["domain"])
        except ImportRejected as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(result))
