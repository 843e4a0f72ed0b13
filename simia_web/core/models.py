"""The audit trail: one event per state change, written in the transaction of the change."""

from django.conf import settings
from django.contrib.contenttypes.fields import GenericForeignKey
from django.contrib.contenttypes.models import ContentType
from django.db import models


class AuditEvent(models.Model):
    """One row per state change, written in the same transaction as the change."""

    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    action = models.CharField(max_length=64)
    target_type = models.CharField(max_length=64)
    target_id = models.CharField(max_length=64)
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    # The workspace the change happened in; empty for a site-wide change, and for events written before
    # workspaces (read as the `default` workspace's by the audit log).
    workspace = models.ForeignKey(
        "accounts.Workspace", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    workspace_path = "workspace"

    class Meta:
        # The audit log pages newest first (-id) under each of its filters: one index per filter, ending in id.
        indexes = [
            models.Index(fields=["target_type", "target_id"]),
            models.Index(fields=["actor", "-id"], name="audit_actor_id"),
            models.Index(fields=["action", "-id"], name="audit_action_id"),
            models.Index(fields=["target_type", "target_id", "-id"], name="audit_target_id"),
            models.Index(fields=["workspace", "-id"], name="audit_workspace_id"),
        ]

    def __str__(self):
        return f"{self.action} {self.target_type}:{self.target_id}"


class Revision(models.Model):
    """A saved version of an editable object: the full snapshot plus the JSON Patch from the last one."""

    content_type = models.ForeignKey(ContentType, on_delete=models.CASCADE)
    object_id = models.PositiveBigIntegerField()
    target = GenericForeignKey("content_type", "object_id")
    version = models.PositiveIntegerField()
    data = models.JSONField()
    changes = models.JSONField(default=list, blank=True)
    author = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    note = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["content_type", "object_id", "-version"]
        constraints = [
            models.UniqueConstraint(fields=["content_type", "object_id", "version"], name="revision_unique_version")
        ]

    def __str__(self):
        return f"{self.content_type.model}:{self.object_id} v{self.version}"
