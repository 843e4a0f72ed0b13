"""The audit log as people read it: who did what, to which object, where, with the values before and after."""

from dataclasses import dataclass
from datetime import UTC, datetime

from django.db.models import Q, QuerySet

from simia_web.accounts.models import DEFAULT_WORKSPACE
from simia_web.accounts.selectors import workspaces_administered
from simia_web.core.models import AuditEvent

PAGE_SIZE = 50


@dataclass(frozen=True)
class AuditFilters:
    actor: str = ""  # a username
    action: str = ""  # an action, or its prefix ending in "." ("membership.")
    target_type: str = ""  # "accounts.user"
    target_id: str = ""
    workspace: str = ""  # a slug
    since: datetime | None = None
    until: datetime | None = None


def audit_events_visible(*, user) -> QuerySet[AuditEvent]:
    """Site administrators read every event; a workspace admin the events of the workspaces they administer (and,
    admins of `default`, the events written without a workspace: those from before workspaces)."""
    events = AuditEvent.objects.all()
    if user.is_site_admin:
        return events
    administered = list(workspaces_administered(user=user).values_list("pk", "slug"))
    visible = Q(workspace_id__in=[pk for pk, _ in administered])
    if any(slug == DEFAULT_WORKSPACE for _, slug in administered):
        visible |= Q(workspace__isnull=True)
    return events.filter(visible)


def audit_events(*, user, filters: AuditFilters) -> QuerySet[AuditEvent]:
    """The events `user` may read under `filters`, newest first (keyset-paged on id by the callers); each filter
    has an index ending in id (core.models.AuditEvent)."""
    events = audit_events_visible(user=user)
    if filters.actor:
        events = events.filter(actor__username=filters.actor)
    if filters.action.endswith("."):
        events = events.filter(action__startswith=filters.action)
    elif filters.action:
        events = events.filter(action=filters.action)
    if filters.target_type:
        events = events.filter(target_type=filters.target_type)
    if filters.target_id:
        events = events.filter(target_id=filters.target_id)
    if filters.workspace:
        events = events.filter(workspace__slug=filters.workspace)
    # Compared in UTC: ISO 8601 allows offsets PostgreSQL refuses (beyond ±15:59), and the instant is the same.
    if filters.since:
        events = events.filter(created_at__gte=filters.since.astimezone(UTC))
    if filters.until:
        events = events.filter(created_at__lt=filters.until.astimezone(UTC))
    return events.select_related("actor", "workspace").order_by("-id")


def audit_page(*, user, filters: AuditFilters, before: int | None = None) -> tuple[list[AuditEvent], int | None]:
    """One page of events older than id `before`, and the id to ask the next page before (None: the last page)."""
    events = audit_events(user=user, filters=filters)
    if before:
        events = events.filter(id__lt=before)
    rows = list(events[: PAGE_SIZE + 1])
    more = len(rows) > PAGE_SIZE
    rows = rows[:PAGE_SIZE]
    return rows, (rows[-1].pk if more else None)


def audit_changes(data: dict) -> list[tuple[str, object, object]]:
    """(field, before, after) for an event's data: `from`/`to` and `before`/`after` pairs, whole or per field."""
    changes: list[tuple[str, object, object]] = []
    for old, new in (("from", "to"), ("before", "after")):
        if old in data or new in data:
            before, after = data.get(old), data.get(new)
            if isinstance(before, dict) and isinstance(after, dict):
                for key in sorted(set(before) | set(after)):
                    if before.get(key) != after.get(key):
                        changes.append((key, before.get(key), after.get(key)))
            else:
                changes.append(("value", before, after))
    return changes
