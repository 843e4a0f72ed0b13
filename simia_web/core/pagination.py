from django.core.exceptions import ValidationError as DjangoValidationError
from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    ordering = "-id"
    page_size_query_param = "page_size"
    max_page_size = 500

    def paginate_queryset(self, queryset, request, view=None):
        """A cursor that does not decode, or whose position is not a value of the ordering field (a tampered
        `?cursor=`), is the client's error: 400, before it reaches a query."""
        try:
            cursor = self.decode_cursor(request)
        except NotFound:
            raise ValidationError({self.cursor_query_param: [self.invalid_cursor_message]}) from None
        if cursor is not None and cursor.position is not None:
            field = queryset.model._meta.get_field(self.get_ordering(request, queryset, view)[0].lstrip("-"))
            try:
                field.run_validators(field.to_python(cursor.position))
            except DjangoValidationError:
                raise ValidationError({self.cursor_query_param: [self.invalid_cursor_message]}) from None
        return super().paginate_queryset(queryset, request, view)
