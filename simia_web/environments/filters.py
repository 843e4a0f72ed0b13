import django_filters

from simia_web.core.filters import TextFilter

from .models import EnvSession


class EnvSessionFilter(django_filters.FilterSet):
    group = TextFilter(field_name="group__key", help_text="Group key.")
    domain = TextFilter(field_name="domain__name", help_text="Domain name.")
    done = django_filters.BooleanFilter(help_text="Ended episodes (true) or running ones (false).")

    class Meta:
        model = EnvSession
        fields: list[str] = []
