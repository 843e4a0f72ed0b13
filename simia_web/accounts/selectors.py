"""Reads of users for the Users page."""

from django.db.models import QuerySet

from .models import Membership, Role, User, Workspace


def user_list() -> QuerySet[User]:
    """Every user, active ones first, by name (paged by the page: a team has hundreds at most)."""
    return User.objects.order_by("-is_active", "username").only(
        "id", "username", "email", "role", "is_active", "last_login", "date_joined", "password"
    )


def workspaces_for(*, user) -> QuerySet[Workspace]:
    """The workspaces `user` may work in: theirs, or every one for a site administrator."""
    if not getattr(user, "is_authenticated", False):
        return Workspace.objects.none()
    if user.is_site_admin:
        return Workspace.objects.order_by("slug")
    return Workspace.objects.filter(memberships__user=user).order_by("slug")


def workspaces_administered(*, user) -> QuerySet[Workspace]:
    """The workspaces whose members `user` manages: where they are an admin, or every one for a site administrator."""
    if user.is_site_admin:
        return Workspace.objects.order_by("slug")
    return Workspace.objects.filter(memberships__user=user, memberships__role=Role.ADMIN).order_by("slug")


def workspace_members(*, workspace: Workspace) -> QuerySet[Membership]:
    return (
        workspace.memberships.select_related("user")
        .only("role", "user__username", "workspace_id")
        .order_by("user__username")
    )
