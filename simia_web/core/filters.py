"""Filters bounded on every path: the same SIMIA_QUERY_MAX_LENGTH for every parameter of every FilterSet, whether
it comes from a page's query string, a bulk action's saved query, a snapshot's stored filters or the REST API.

django-filter leaves a filter out when its value does not validate, so a query that is too long would have run
without it (a bulk action over everything instead of over the matches). Here it is a form error (code
`query_too_long`), and filtering with it raises QueryTooLong (a 400) instead. A 50,000-word full-text search
made PostgreSQL fail with "stack depth limit exceeded".
"""

import django_filters
from django import forms
from django.conf import settings
from django.core.exceptions import BadRequest, ValidationError
from drf_spectacular.utils import extend_schema_field

from .errors import ValidationFailed

QUERY_TOO_LONG = "query_too_long"


class QueryTooLong(ValidationFailed, BadRequest):
    """Filter parameters over SIMIA_QUERY_MAX_LENGTH: a 400 naming each, `{name: [message]}`."""

    def __init__(self, too_long: dict[str, str]):
        super().__init__(
            "; ".join(f"{name}: {message}" for name, message in too_long.items()), field=next(iter(too_long))
        )
        self.too_long = too_long
        self.errors = {name: [message] for name, message in too_long.items()}


def _too_long_message() -> str:
    return f"at most {settings.SIMIA_QUERY_MAX_LENGTH:,} characters (SIMIA_QUERY_MAX_LENGTH)"


def _values(data, name: str) -> list:
    return data.getlist(name) if hasattr(data, "getlist") else [data.get(name)]


class _LengthCheckedForm(forms.Form):
    def clean(self):
        cleaned = super().clean()
        limit = settings.SIMIA_QUERY_MAX_LENGTH
        for name in self.fields:
            values = _values(self.data, self.add_prefix(name))
            if any(isinstance(value, str) and len(value) > limit for value in values):
                self.add_error(name, ValidationError(_too_long_message(), code=QUERY_TOO_LONG))
        return cleaned


class BoundedFilterSet(django_filters.FilterSet):
    def get_form_class(self):
        form_class = super().get_form_class()
        return type(form_class.__name__, (_LengthCheckedForm, form_class), {})

    def filter_queryset(self, queryset):
        too_long = {
            name: errors[0].message
            for name, errors in self.form.errors.as_data().items()
            if any(error.code == QUERY_TOO_LONG for error in errors)
        }
        if too_long:
            raise QueryTooLong(too_long)
        return super().filter_queryset(queryset)


@extend_schema_field({"type": "integer", "format": "int64", "minimum": 1, "maximum": 2**63 - 1})
class IdFilter(django_filters.NumberFilter):
    """A row id: a whole number in the database's range (larger ones are refused, not overflowed)."""

    field_class = forms.IntegerField

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", 2**63 - 1)
        super().__init__(*args, **kwargs)


@extend_schema_field({"type": "string", "pattern": "^[^\\x00]*$"})
class TextFilter(django_filters.CharFilter):
    """Free text; the schema says what forms refuse (NUL characters)."""
