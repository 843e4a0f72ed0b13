"""Audit and revision writes shared by every app."""

from typing import Any

import jsonpatch
from django.contrib.contenttypes.models import ContentType
from django.db import models

from .errors import VersionConflict
from .models import AuditEvent, Revision


def audit_record(
    *, actor, action: str, target: models.Model | None, data: dict | None = None, workspace: Any = None
) -> AuditEvent:
    """One event: who (`actor`, None for the system) did `action` to `target` (None: to nothing stored, as a
    refused sign-in); `data` holds what changed (by convention `from`/`to` for edits and settings); `workspace`
    where, if anywhere: by default the workspace that owns the target, so that only its admins read the event."""
    return AuditEvent.objects.create(
        actor=actor if getattr(actor, "pk", None) else None,
        action=action,
        target_type=target._meta.label_lower if target is not None else "",
        target_id=str(target.pk) if target is not None else "",
        data=data or {},
        workspace_id=workspace.pk if getattr(workspace, "pk", None) else owner_workspace_id_of(target),
    )


def owner_workspace_id_of(target: models.Model | None) -> int | None:
    """The id of the workspace that owns `target`, by its model's `workspace_path` (accounts.scoping); None for a
    deployment-wide model or no target. One query where the owner is not on the row itself."""
    path = getattr(type(target), "workspace_path", None)
    if target is None or target.pk is None or not path:
        return None
    if path == "workspace":
        return getattr(target, "workspace_id", None)
    return type(target)._default_manager.filter(pk=target.pk).values_list(path, flat=True).first()


# `obj` below: a model instance with an integer `version` field (Catalog items, trajectories).
def revision_record(
    *, obj: Any, data: dict[str, Any], author=None, note: str = "", version: int | None = None
) -> Revision:
    """Store `data` as revision `version` (by default `obj.version`), with the JSON Patch from the previous one."""
    content_type = ContentType.objects.get_for_model(obj)
    version = obj.version if version is None else version
    previous = (
        Revision.objects.filter(content_type=content_type, object_id=obj.pk, version__lt=version)
        .order_by("-version")
        .first()
    )
    changes = jsonpatch.make_patch(previous.data, data).patch if previous else []
    return Revision.objects.create(
        content_type=content_type,
        object_id=obj.pk,
        version=version,
        data=data,
        changes=changes,
        author=author if getattr(author, "pk", None) else None,
        note=note[:300],
    )


def versioned_update(*, obj: Any, expected_version: int, fields: dict[str, Any]) -> int:
    """Compare-and-set update: write `fields` and bump the version only if nobody saved in between.

    Raises VersionConflict (with obj refreshed to the current row) when the version moved.
    """
    model = type(obj)
    updated = model.objects.filter(pk=obj.pk, version=expected_version).update(
        version=models.F("version") + 1, **fields
    )
    obj.refresh_from_db()
    if not updated:
        raise VersionConflict(obj, expected_version)
    return obj.version


def audit_purge(*, before, batch: int = 5000) -> int:
    """Delete the audit events written before `before`, in batches of `batch` rows (short transactions); the count."""
    purged = 0
    while True:
        ids = list(AuditEvent.objects.filter(created_at__lt=before).order_by("id").values_list("id", flat=True)[:batch])
        if not ids:
            return purged
        purged += AuditEvent.objects.filter(id__in=ids).delete()[0]
