"""Reading the rollups (curation.rollups keeps them): a figure's rows of the workspaces' domains, narrowed by domain,
job or profile, summed."""

from collections.abc import Iterable
from datetime import date

from django.db.models import QuerySet, Sum
from django.utils import timezone

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import Rollup


def rollup_rows(figure: str, *, workspace_ids: Iterable[int], **filters) -> QuerySet[Rollup]:
    """The rollup rows of one figure over the domains of the workspaces `workspace_ids` (rollups are kept per
    domain, and a domain is one workspace's), narrowed by the filters that are set (None or 0 means any)."""
    rows = scoped(Rollup.objects.filter(figure=figure, n__gt=0), workspace_ids)
    return rows.filter(**{name: value for name, value in filters.items() if value})


def rollup_counts(rows: QuerySet[Rollup], *keys: str) -> QuerySet:
    """(*keys, count) tuples, summed over the rows' other columns."""
    return rows.values_list(*keys).annotate(count=Sum("n")).order_by()


def rollup_today() -> date:
    """Today in the time zone the rollups' days are counted in (whole days: a figure over the last N days counts
    today and the N - 1 days before it)."""
    return timezone.localdate(timezone=timezone.get_default_timezone())
