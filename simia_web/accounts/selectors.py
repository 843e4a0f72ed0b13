"""Reads of users for the Users page."""

from typing import Any

from django.db.models import F, QuerySet

from .models import Membership, Role, User, Workspace


def user_list(*, workspace: Workspace | None = None) -> QuerySet[Any]:
    """The members of `workspace` with their role there (`workspace_role`), or every user when None (a site
    administrator's view), active ones first, by name (paged by the page: a team has hundreds at most)."""
    users: QuerySet[Any] = User.objects.all()
    if workspace is None:
        users = users.annotate(workspace_role=F("role"))
    else:
        users = users.filter(memberships__workspace=workspace).annotate(workspace_role=F("memberships__role"))
    return users.order_by("-is_active", "username").only(
        "id", "username", "email", "role", "is_active", "last_login", "date_joined", "password"
    )


def user_in_scope(*, workspace: Workspace | None, pk: int) -> User | None:
    """The user `pk` as the Users page of `workspace` shows them (None: not one of its members)."""
    return user_list(workspace=workspace).filter(pk=pk).first()


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
