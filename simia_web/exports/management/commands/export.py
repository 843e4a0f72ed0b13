"""Write a dataset file from the command line, with the same writers as snapshot jobs."""

from pathlib import Path

from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError

from simia_web.exports.formats import WRITERS
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import export_write


class Command(BaseCommand):
    help = "Export trajectories as openai JSONL, a LLaMA-Factory ShareGPT zip, or τ²-bench JSON."

    def add_arguments(self, parser):
        parser.add_argument("--format", required=True, choices=sorted(WRITERS))
        parser.add_argument(
            "--status", default="accepted", help="Comma-separated statuses, or 'all' (default: accepted)."
        )
        parser.add_argument("--domain", help="Only this domain (by name).")
        parser.add_argument("--job", type=int, help="Only trajectories made by this job.")
        parser.add_argument(
            "--output",
            required=True,
            help="Data file to write (a .zip for sharegpt); its manifest (NAME.manifest.jsonl) and report "
            "(NAME.report.json) are written beside it.",
        )

    def handle(self, *args, **options):
        filters = {"status": options["status"]}
        if options["domain"]:
            filters["domain"] = options["domain"]
        if options["job"]:
            filters["job"] = options["job"]
        try:
            cleaned = export_filters_clean(filters)
        except ValidationError as exc:
            raise CommandError("; ".join(f"{k}: {' '.join(v)}" for k, v in exc.message_dict.items())) from None
        result = export_write(format=options["format"], filters=cleaned, path=options["output"], label="simia_export")
        stats = result.stats
        self.stdout.write(
            f"wrote {stats.count} records to {options['output']} ({result.bytes} bytes, sha256 {result.sha256})"
        )
        for written in result.files[1:]:
            beside = Path(options["output"]).with_name(written.name)
            self.stdout.write(f"wrote the {written.kind} {beside} ({written.bytes} bytes, sha256 {written.sha256})")
        if stats.repaired_count:
            self.stdout.write(f"repaired {stats.repaired_count} records (consecutive same-side turns merged)")
        if stats.refused_count:
            self.stdout.write(f"left out {stats.refused_count} records that failed the gate:")
            for reason, n in stats.refusal_reasons.most_common():
                self.stdout.write(f"  {n:>6}  {reason}")
