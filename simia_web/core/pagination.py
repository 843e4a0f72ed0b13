from rest_framework.exceptions import NotFound, ValidationError
from rest_framework.pagination import CursorPagination


class IdCursorPagination(CursorPagination):
    ordering = "-id"
    page_size_query_param = "page_size"
    max_page_size = 500

    def decode_cursor(self, request):
        """A cursor that does not decode, or whose position is not an id, is the client's error: 400."""
        try:
            cursor = super().decode_cursor(request)
        except NotFound:
            cursor = False
        if cursor is False or (cursor and cursor.position is not None and not _is_id(cursor.position)):
            raise ValidationError({self.cursor_query_param: [self.invalid_cursor_message]})
        return cursor


def _is_id(position: str) -> bool:
    return position.isascii() and position.isdigit() and len(position) <= 19
