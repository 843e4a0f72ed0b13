"""Who work on a workspace's items: its members, the only people its items are given to."""

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.db.models import QuerySet


def workspace_people(*, workspace_ids: Iterable[int]) -> QuerySet:
    """The active members of the workspaces `workspace_ids`, by name."""
    people = get_user_model().objects.filter(is_active=True, memberships__workspace_id__in=list(workspace_ids))
    return people.distinct().order_by("username")
