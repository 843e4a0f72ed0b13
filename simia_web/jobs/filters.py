import django_filters

from simia_web.core.filters import BoundedFilterSet

from .kinds import job_kind_choices
from .models import Job, JobStatus


class JobFilter(BoundedFilterSet):
    kind = django_filters.ChoiceFilter(choices=job_kind_choices)
    status = django_filters.ChoiceFilter(choices=JobStatus.choices)

    class Meta:
        model = Job
        fields: list[str] = []
