"""Reads every app shares: an object's revisions."""

from django.contrib.contenttypes.models import ContentType
from django.db import models

from .display import json_diff
from .models import Revision


def revision_list(*, obj: models.Model):
    return Revision.objects.filter(
        content_type=ContentType.objects.get_for_model(obj), object_id=obj.pk
    ).select_related("author")


def revision_diffs(*, obj: models.Model, limit: int) -> list[dict]:
    """The object's last `limit` revisions, newest first, each with its line diff against the one before."""
    revisions = list(revision_list(obj=obj).order_by("-version")[: limit + 1])
    return [
        {"revision": revision, "diff": json_diff(previous.data, revision.data) if previous else []}
        for revision, previous in zip(revisions[:limit], [*revisions[1:], None], strict=False)
    ]
