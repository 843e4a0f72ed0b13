"""Write a dataset file set from the command line, with the same writers as snapshot jobs."""

from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from simia_web.accounts.scoping import command_workspace
from simia_web.core.errors import ValidationFailed, fields_said
from simia_web.curation.duplicates import KEEP_ORDERS
from simia_web.exports.hub import FAILED, hub_push
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import ExportOptions, export_write
from simia_web.exports.writers import SHARDED, WRITERS


class Command(BaseCommand):
    help = "Export trajectories as openai JSONL, a LLaMA-Factory ShareGPT zip, τ²-bench JSON or Parquet shards."

    def add_arguments(self, parser):
        parser.add_argument("--format", required=True, choices=sorted(WRITERS))
        parser.add_argument(
            "--status", default="accepted", help="Comma-separated statuses, or 'all' (default: accepted)."
        )
        parser.add_argument("--domain", help="Only this domain (by name).")
        parser.add_argument("--job", type=int, help="Only trajectories made by this job.")
        parser.add_argument("--workspace", help="The workspace whose trajectories are exported (default: default).")
        parser.add_argument(
            "--output",
            required=True,
            help="Data file to write (a .zip for sharegpt); its manifest (NAME.manifest.jsonl) and report "
            "(NAME.report.json) are written beside it. For parquet, a new folder: the shards go in its data/, the "
            "manifest and report beside that.",
        )
        parser.add_argument(
            "--card",
            action="store_true",
            help="Also write the dataset card, README.md and images/, beside the data (replacing any there).",
        )
        parser.add_argument(
            "--dedup",
            choices=sorted(KEEP_ORDERS),
            default="",
            help="Keep one trajectory per near-duplicate cluster, the one accepted first or with the highest judge "
            "score; the report (and card) say how many were removed.",
        )
        parser.add_argument("--shard-rows", type=int, default=0, help="parquet: rows per shard at most.")
        parser.add_argument("--shard-bytes", type=int, default=0, help="parquet: bytes per shard, about.")
        parser.add_argument(
            "--push-to-hub",
            metavar="REPO",
            nargs="?",
            const=settings.HF_DATASET_REPO,
            help="Push the written files to this Hugging Face dataset repo (default SIMIA_HF_DATASET_REPO); needs "
            "HF_TOKEN and network, else it is skipped and says why.",
        )

    def handle(self, *args, **options):
        filters = {"status": options["status"]}
        if options["domain"]:
            filters["domain"] = options["domain"]
        if options["job"]:
            filters["job"] = options["job"]
        try:
            cleaned = export_filters_clean(filters)
            workspace = command_workspace(options["workspace"])
        except ValidationFailed as exc:
            raise CommandError(fields_said(exc.errors)) from None
        chosen = ExportOptions(
            label="simia_export",
            card=options["card"],
            shard_rows=options["shard_rows"],
            shard_bytes=options["shard_bytes"],
            dedup=options["dedup"],
        )
        output = Path(options["output"])
        try:
            result = export_write(
                format=options["format"], filters=cleaned, path=output, options=chosen, workspace_id=workspace.pk
            )
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        stats = result.stats
        folder = output if options["format"] in SHARDED else output.parent
        self.stdout.write(
            f"wrote {stats.count} records to {output} ({result.bytes} bytes in {len(result.data_files)} data "
            f"file(s), sha256 {result.sha256})"
        )
        for written in result.files[len(result.data_files) :]:
            self.stdout.write(
                f"wrote the {written.kind} {folder / written.name} ({written.bytes} bytes, sha256 {written.sha256})"
            )
        if stats.repaired_count:
            self.stdout.write(f"repaired {stats.repaired_count} records (consecutive same-side turns merged)")
        duplicates = stats.facts.duplicates
        if duplicates is not None:
            self.stdout.write(f"left out {duplicates.total()} near-duplicates (one kept per cluster)")
        if stats.refused_count:
            self.stdout.write(f"left out {stats.refused_count} records that failed the gate:")
            for reason, n in stats.refusal_reasons.most_common():
                self.stdout.write(f"  {n:>6}  {reason}")
        if options["push_to_hub"] is not None:
            names = [written.name for written in result.files]
            outcome = hub_push(folder=folder, names=names, repo=options["push_to_hub"], message="Simia Web export")
            self.stdout.write(f"Hugging Face Hub: {outcome['status']}: {outcome['detail']} {outcome['url']}".rstrip())
            if outcome["status"] == FAILED:
                raise CommandError(outcome["detail"])
