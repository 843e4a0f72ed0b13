"""Reads of users for the Users page."""

from django.db.models import QuerySet

from .models import User


def user_list() -> QuerySet[User]:
    """Every user, active ones first, by name (paged by the page: a team has hundreds at most)."""
    return User.objects.order_by("-is_active", "username").only(
        "id", "username", "email", "role", "is_active", "last_login", "date_joined", "password"
    )
