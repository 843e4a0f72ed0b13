"""Role checks shared by the pages and the REST API."""

from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission

from .models import Role


def user_has_role(user, role: str) -> bool:
    return bool(user and user.is_authenticated and user.has_role(role))


def role_required(role: str):
    """Page decorator: anonymous visitors go to the login page, the wrong role gets 403."""

    def decorator(view):
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            if not request.user.is_authenticated:
                return redirect_to_login(request.get_full_path())
            if not request.user.has_role(role):
                raise PermissionDenied(f"This page needs the {role} role.")
            return view(request, *args, **kwargs)

        return wrapped

    return decorator


class _RolePermission(BasePermission):
    role = Role.ANNOTATOR
    message = "Your role does not allow this."

    def has_permission(self, request, view):
        return user_has_role(request.user, self.role)


class IsMember(_RolePermission):
    """Any signed-in user with a role (annotator and above)."""


class IsCurator(_RolePermission):
    role = Role.CURATOR


class IsAdmin(_RolePermission):
    role = Role.ADMIN


class ReadMemberWriteCurator(BasePermission):
    """Members read; curators and admins write."""

    message = "Your role can read this but not change it."

    def has_permission(self, request, view):
        role = Role.ANNOTATOR if request.method in SAFE_METHODS else Role.CURATOR
        return user_has_role(request.user, role)
