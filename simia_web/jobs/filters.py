import django_filters

from .models import Job, JobStatus
from .pipelines import job_kind_choices


class JobFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=job_kind_choices)
    status = django_filters.ChoiceFilter(choices=JobStatus.choices)

    class Meta:
        model = Job
        fields = []
