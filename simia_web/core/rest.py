"""The REST API's refusals: the gate's and the services' errors as 400 answers naming the field, and query
parameters bounded before they reach a query."""

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django_filters.rest_framework import DjangoFilterBackend
from rest_framework.exceptions import ValidationError
from rest_framework.views import exception_handler as drf_exception_handler

from .json_input import JsonRefused
from .parsers import refusal_detail


def exception_handler(exc, context):
    """DRF's handler, after turning the gate's refusals and the services' ValidationErrors into 400 answers."""
    if isinstance(exc, JsonRefused):
        exc = ValidationError(refusal_detail(exc))
    elif isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages})
    return drf_exception_handler(exc, context)


class BoundedFilterBackend(DjangoFilterBackend):
    """django-filter, refusing a query parameter longer than SIMIA_QUERY_MAX_LENGTH before it reaches a query."""

    def filter_queryset(self, request, queryset, view):
        limit = settings.SIMIA_QUERY_MAX_LENGTH
        too_long = {
            name: [f"at most {limit:,} characters"]
            for name, values in request.query_params.lists()
            if any(len(value) > limit for value in values)
        }
        if too_long:
            raise ValidationError(too_long)
        return super().filter_queryset(request, queryset, view)
