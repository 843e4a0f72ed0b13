import django_filters

from simia_web.core.filters import BoundedFilterSet
from simia_web.curation.filters import IdFilter, TextFilter

from .models import Api, ApiKind, Seed, SeedFormat, Task, TaskStatus


class DomainScopedFilter(BoundedFilterSet):
    domain = TextFilter(field_name="domain__name", help_text="Domain name.")
    job = IdFilter(field_name="job_id")


class ApiFilter(DomainScopedFilter):
    kind = django_filters.ChoiceFilter(choices=ApiKind.choices)
    valid = django_filters.BooleanFilter()
    q = TextFilter(field_name="name", lookup_expr="icontains", help_text="Text in the API name.")

    class Meta:
        model = Api
        fields = []


class TaskFilter(DomainScopedFilter):
    status = django_filters.ChoiceFilter(choices=TaskStatus.choices)
    q = TextFilter(field_name="instruction", lookup_expr="icontains", help_text="Text in the instruction.")

    class Meta:
        model = Task
        fields = []


class SeedFilter(DomainScopedFilter):
    usable = django_filters.BooleanFilter()
    source_format = django_filters.ChoiceFilter(choices=SeedFormat.choices)

    class Meta:
        model = Seed
        fields = []
