import django_filters

from .models import Job, JobKind, JobStatus


class JobFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=JobKind.choices)
    status = django_filters.ChoiceFilter(choices=JobStatus.choices)

    class Meta:
        model = Job
        fields = []
