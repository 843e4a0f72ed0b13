from django.contrib.auth.password_validation import validate_password
from django.db import transaction
from rest_framework.authtoken.models import Token

from simia_web.core.services import audit_record

from .models import Role, User


def _role_check(role: str) -> None:
    if role not in Role.values:
        raise ValueError(f"Unknown role {role!r}; choose one of {', '.join(Role.values)}.")


@transaction.atomic
def user_create(*, username: str, role: str, password: str, actor=None, email: str = "") -> User:
    _role_check(role)
    user = User(username=username, role=role, email=email)
    user.full_clean(exclude=["password"])
    validate_password(password, user)  # the same length and similarity rules as the password forms
    user.set_password(password)
    user.save()
    audit_record(actor=actor, action="user.create", target=user, data={"role": role})
    return user


@transaction.atomic
def user_role_set(*, user: User, role: str, actor=None) -> User:
    """Give the user another role; its staff and superuser flags follow (the database derives them)."""
    _role_check(role)
    before = user.role
    user.role = role
    user.save(update_fields=["role"])
    audit_record(actor=actor, action="user.role", target=user, data={"from": before, "to": role})
    return user


def user_token(*, user: User) -> str:
    token, _ = Token.objects.get_or_create(user=user)
    return token.key
