"""The snapshot list's filters, shared by the exports page and the REST list."""

import django_filters

from simia_web.core.filters import BoundedFilterSet

from .models import ExportFormat, Snapshot


class SnapshotFilter(BoundedFilterSet):
    format = django_filters.ChoiceFilter(choices=ExportFormat.choices)

    class Meta:
        model = Snapshot
        fields: list[str] = []
