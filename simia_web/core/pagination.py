from rest_framework.exceptions import NotFound
from rest_framework.pagination import CursorPagination

from .errors import ValidationFailed, django_validation


class IdCursorPagination(CursorPagination):
    ordering = "-id"
    page_size_query_param = "page_size"
    max_page_size = 500

    def paginate_queryset(self, queryset, request, view=None):
        """A cursor that does not decode, or whose position is not a value of the ordering field (a tampered
        `?cursor=`), is the client's error: 400, before it reaches a query."""
        refused = ValidationFailed(str(self.invalid_cursor_message), field=self.cursor_query_param)
        try:
            cursor = self.decode_cursor(request)
        except NotFound:
            raise refused from None
        if cursor is not None and cursor.position is not None:
            field = queryset.model._meta.get_field(self.get_ordering(request, queryset, view)[0].lstrip("-"))
            try:
                with django_validation():
                    field.run_validators(field.to_python(cursor.position))
            except ValidationFailed:
                raise refused from None
        return super().paginate_queryset(queryset, request, view)
