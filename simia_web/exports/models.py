"""Snapshots: a requested dataset (format, filters, options), the job that builds it, and what came out: its files
with their checksums, the records left out and why, and its publication."""

from django.conf import settings
from django.db import models

from simia_web.core.errors import Conflict


class ExportFormat(models.TextChoices):
    OPENAI = "openai", "OpenAI chat fine-tuning JSONL"
    SHAREGPT = "sharegpt", "LLaMA-Factory ShareGPT (zip with dataset_info.json)"
    TAU2 = "tau2", "τ²-bench tasks and simulations JSON"
    PARQUET = "parquet", "Parquet shards (Hugging Face datasets)"


class FileKind(models.TextChoices):
    DATA = "data", "Data"
    MANIFEST = "manifest", "Manifest"
    REPORT = "report", "Report"
    CARD = "card", "Dataset card"
    IMAGE = "image", "Dataset card plot"


class Snapshot(models.Model):
    """A built dataset: what was asked for (format, filters, options) and what came out, a set of files in a folder
    of its own: the data (`file`, `bytes`, `sha256`; Parquet's is shards in `data/`), the manifest tracing each
    record to its review, the dataset card (README.md and its plots) and the report (counts, what was left out and
    why, the other files' sizes and sha256). `files` lists them all.

    Its status is its job's status. Once `sha256` is set the row and its files never change (`hub` records a later
    publication of them, through an update).
    """

    format = models.CharField(max_length=16, choices=ExportFormat.choices)
    filters = models.JSONField(default=dict, blank=True)
    # How to build it beyond the filters: Parquet shard limits (shard_rows, shard_bytes) and publishing
    # (push_to_hub, hub_repo). See exports.selectors.export_options_clean.
    options = models.JSONField(default=dict, blank=True)
    job = models.OneToOneField("jobs.Job", on_delete=models.PROTECT, related_name="snapshot")

    workspace_path = "job__workspace"
    count = models.PositiveIntegerField(default=0)
    refused_count = models.PositiveIntegerField(default=0)
    # {reason: n} over every refused row, and the first rows with their reasons (capped).
    refusal_reasons = models.JSONField(default=dict, blank=True)
    refusals = models.JSONField(default=list, blank=True)
    repaired_count = models.PositiveIntegerField(default=0)
    bytes = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    file = models.CharField(
        max_length=300,
        blank=True,
        help_text="The data file's path relative to EXPORTS_DIR (Parquet: the shards' folder).",
    )
    # [{"name" (inside the snapshot's folder), "path" (relative to EXPORTS_DIR), "kind", "bytes", "sha256"}]: the
    # data (one entry per shard), the manifest, the card and its images, the report.
    files = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    # Where the built files were published, if asked: {"status": pushed | skipped | failed, "detail", "repo",
    # "url", "at"}. Written after the build; the only field that changes once `sha256` is set.
    hub = models.JSONField(default=dict, blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"snapshot {self.pk} {self.format}"

    def save(self, *args, **kwargs):
        if self.pk and Snapshot.objects.filter(pk=self.pk).exclude(sha256="").exists():
            raise Conflict("A built snapshot is immutable.")
        super().save(*args, **kwargs)

    @property
    def is_built(self) -> bool:
        return bool(self.sha256)

    def file_entry(self, kind: str) -> dict | None:
        return next((entry for entry in self.files if entry["kind"] == kind), None)
