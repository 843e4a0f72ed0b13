from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
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


# -- users as admins manage them on the Users page ---------------------------------------------------------------


def _last_admin_check(*, user: User, role: str, is_active: bool) -> None:
    """Refuse a change that would leave no active admin (nobody could then manage users or endpoints)."""
    if user.role != Role.ADMIN or (role == Role.ADMIN and is_active):
        return
    if not User.objects.filter(role=Role.ADMIN, is_active=True).exclude(pk=user.pk).exists():
        raise ValidationError(
            {"role": "This is the only active admin: make another user an admin first, or nobody can manage users."}
        )


@transaction.atomic
def user_invite(*, username: str, role: str, actor, email: str = "") -> User:
    """A user without a password yet: they choose one through the link of `user_password_link`."""
    _role_check(role)
    user = User(username=username, role=role, email=email)
    user.full_clean(exclude=["password"])
    user.set_unusable_password()
    user.save()
    audit_record(actor=actor, action="user.invite", target=user, data={"role": role})
    return user


def user_password_link(*, user: User) -> tuple[str, str]:
    """(uidb64, token) of a one-time link where the user sets their password (valid PASSWORD_RESET_TIMEOUT seconds,
    and only until the password changes)."""
    return urlsafe_base64_encode(force_bytes(user.pk)), default_token_generator.make_token(user)


@transaction.atomic
def user_update(*, user: User, role: str, is_active: bool, email: str, actor) -> User:
    """Change a user's role, e-mail address and whether they can log in; never the last active admin's."""
    _role_check(role)
    if actor is not None and user.pk == actor.pk and not is_active:
        raise ValidationError({"is_active": "You cannot deactivate yourself: ask another admin."})
    _last_admin_check(user=user, role=role, is_active=is_active)
    if role != user.role:
        user_role_set(user=user, role=role, actor=actor)
    changes: dict[str, str | bool] = {}
    if email != user.email:
        user.email = email
        user.full_clean(exclude=["password"])
        changes["email"] = email
    if is_active != user.is_active:
        user.is_active = is_active
        changes["is_active"] = is_active
    if changes:
        user.save(update_fields=list(changes))
        audit_record(actor=actor, action="user.update", target=user, data=changes)
    return user


@transaction.atomic
def user_password_set(*, user: User, password: str, actor) -> User:
    validate_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    audit_record(actor=actor, action="user.password", target=user, data={})
    return user
