"""The catalog's list filters: one meaning per query parameter for the list pages and the REST API alike (the
pages read them through the `<noun>_list` selectors, the API documents and checks them)."""

import django_filters
from django.db.models import Q

from simia_web.core.filters import BoundedFilterSet, IdFilter, TextFilter

from .models import Api, ApiKind, Domain, DomainSource, Seed, SeedFormat, Task, TaskStatus


def name_or_description(queryset, name, value):
    return queryset.filter(Q(name__icontains=value) | Q(description__icontains=value))


class DomainFilter(BoundedFilterSet):
    source = django_filters.ChoiceFilter(choices=DomainSource.choices)
    q = TextFilter(method=name_or_description, help_text="Text in the domain's name or description.")

    class Meta:
        model = Domain
        fields: list[str] = []


class DomainScopedFilter(BoundedFilterSet):
    domain = TextFilter(field_name="domain__name", help_text="Domain name.")
    job = IdFilter(field_name="job_id")


class ApiFilter(DomainScopedFilter):
    kind = django_filters.ChoiceFilter(choices=ApiKind.choices)
    valid = django_filters.BooleanFilter(help_text="Valid APIs (true) or the ones with schema errors (false).")
    q = TextFilter(method=name_or_description, help_text="Text in the API's name or description.")

    class Meta:
        model = Api
        fields: list[str] = []


class TaskFilter(DomainScopedFilter):
    status = django_filters.ChoiceFilter(choices=TaskStatus.choices)
    q = TextFilter(field_name="instruction", lookup_expr="icontains", help_text="Text in the instruction.")

    class Meta:
        model = Task
        fields: list[str] = []


class SeedFilter(DomainScopedFilter):
    usable = django_filters.BooleanFilter(help_text="Usable seeds (true) or the ones with problems (false).")
    source_format = django_filters.ChoiceFilter(choices=SeedFormat.choices)

    class Meta:
        model = Seed
        fields: list[str] = []
