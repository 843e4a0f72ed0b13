from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models


class ExportFormat(models.TextChoices):
    OPENAI = "openai", "OpenAI chat fine-tuning JSONL"
    SHAREGPT = "sharegpt", "LLaMA-Factory ShareGPT (zip with dataset_info.json)"
    TAU2 = "tau2", "τ²-bench tasks and simulations JSON"


class Snapshot(models.Model):
    """A built dataset file: what was asked for (format, filters) and what came out (count, bytes, sha256).

    Its status is its job's status. Once `sha256` is set the row and its file never change.
    """

    format = models.CharField(max_length=16, choices=ExportFormat.choices)
    filters = models.JSONField(default=dict, blank=True)
    job = models.OneToOneField("jobs.Job", on_delete=models.PROTECT, related_name="snapshot")
    count = models.PositiveIntegerField(default=0)
    refused_count = models.PositiveIntegerField(default=0)
    # {reason: n} over every refused row, and the first rows with their reasons (capped).
    refusal_reasons = models.JSONField(default=dict, blank=True)
    refusals = models.JSONField(default=list, blank=True)
    repaired_count = models.PositiveIntegerField(default=0)
    bytes = models.PositiveBigIntegerField(default=0)
    sha256 = models.CharField(max_length=64, blank=True)
    file = models.CharField(max_length=300, blank=True, help_text="Path relative to EXPORTS_DIR.")
    error = models.TextField(blank=True)
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)
    built_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"snapshot {self.pk} {self.format}"

    def save(self, *args, **kwargs):
        if self.pk and Snapshot.objects.filter(pk=self.pk).exclude(sha256="").exists():
            raise ValidationError("A built snapshot is immutable.")
        super().save(*args, **kwargs)

    @property
    def is_built(self) -> bool:
        return bool(self.sha256)
