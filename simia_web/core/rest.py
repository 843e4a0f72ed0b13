"""The REST API's one exception handler and its error body, and query parameters bounded before they reach a
query."""

from collections.abc import Callable
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import QuerySet
from django_filters import FilterSet
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.utils import translate_validation
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.negotiation import DefaultContentNegotiation
from rest_framework.response import Response
from rest_framework.settings import APISettings
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from .errors import ApplicationError
from .filters import QueryTooLong


class ErrorSerializer(serializers.Serializer):
    """The body of an error answer that is not about a field."""

    detail = serializers.CharField()


def exception_handler(exc, context):
    """Every refusal as its answer: an ApplicationError with its own status, body and headers; Django's own
    ValidationError (a model's validation run outside a service) as a 400 naming the fields; the rest as DRF
    answers them."""
    if isinstance(exc, ApplicationError):
        set_rollback()
        return Response(exc.body(), status=exc.status_code, headers=exc.headers())
    if isinstance(exc, DjangoValidationError):
        exc = ValidationError(exc.message_dict if hasattr(exc, "error_dict") else {"detail": exc.messages})
    return drf_exception_handler(exc, context)


def query_length_check(query_params) -> None:
    """A 400 naming every query parameter longer than SIMIA_QUERY_MAX_LENGTH, before it reaches a query."""
    limit = settings.SIMIA_QUERY_MAX_LENGTH
    too_long = {
        name: f"at most {limit:,} characters"
        for name, values in query_params.lists()
        if any(len(value) > limit for value in values)
    }
    if too_long:
        raise QueryTooLong(too_long)


class BoundedFilterBackend(DjangoFilterBackend):
    """django-filter, refusing a query parameter longer than SIMIA_QUERY_MAX_LENGTH before it reaches a query."""

    def filter_queryset(self, request, queryset, view):
        query_length_check(request.query_params)
        return super().filter_queryset(request, queryset, view)


if TYPE_CHECKING:
    from rest_framework.generics import GenericAPIView

    _ListView = GenericAPIView
else:
    # The mixin goes on a GenericAPIView; importing generics here would loop (its settings load this module).
    _ListView = object


class SelectorListMixin(_ListView):
    """A list endpoint answered by the `<noun>_list(*, filters)` selector its page uses, so that a query parameter
    means the same on both.

    The query is checked first as the filter backend checks it, with the view's `filterset_class` (the selector's
    FilterSet, which also documents the parameters): a value that does not validate is a 400 naming it, where a
    page leaves that filter out."""

    # staticmethod(<noun>_list); the FilterSet is the view's filterset_class.
    list_selector: Callable[..., QuerySet]
    filterset_class: type[FilterSet]

    def list(self, request, *args, **kwargs):
        query_length_check(request.query_params)
        filterset = self.filterset_class(request.query_params, request=request)
        if not filterset.is_valid():
            raise translate_validation(filterset.errors)
        page = self.paginate_queryset(self.list_selector(filters=request.query_params, **self.list_scope()))
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    def list_scope(self) -> dict:
        """Further keyword arguments of the selector that say whose rows the request reads (see WorkspaceScoped)."""
        return {}


class FormatIsAFilter(DefaultContentNegotiation):
    """For an endpoint with a filter named `format` (a snapshot's): there it is not DRF's renderer override
    (`?format=json`), which answered `?format=parquet` with 404. The API answers JSON either way."""

    # The stubs type `settings` as the project-wide api_settings and its user_settings as every key's dict.
    settings = APISettings(user_settings={"URL_FORMAT_OVERRIDE": None})  # type: ignore[assignment, arg-type]
