"""Reading the rollups (curation.rollups keeps them): a figure's rows narrowed by domain, job or profile, summed."""

from datetime import date

from django.db.models import QuerySet, Sum
from django.utils import timezone

from simia_web.curation.models import Rollup


def rollup_rows(figure: str, **filters) -> QuerySet[Rollup]:
    """The rollup rows of one figure, narrowed by the filters that are set (None or 0 means any)."""
    return Rollup.objects.filter(figure=figure, n__gt=0, **{name: value for name, value in filters.items() if value})


def rollup_counts(rows: QuerySet[Rollup], *keys: str) -> QuerySet:
    """(*keys, count) tuples, summed over the rows' other columns."""
    return rows.values_list(*keys).annotate(count=Sum("n")).order_by()


def rollup_today() -> date:
    """Today in the time zone the rollups' days are counted in (whole days: a figure over the last N days counts
    today and the N - 1 days before it)."""
    return timezone.localdate(timezone=timezone.get_default_timezone())
