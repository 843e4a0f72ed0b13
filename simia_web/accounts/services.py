"""Users, workspaces and memberships: every write that changes who may do what, with its audit event."""

import re

from django.contrib.auth.password_validation import validate_password
from django.contrib.auth.tokens import default_token_generator
from django.db import transaction
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode
from rest_framework.authtoken.models import Token

from simia_web.core.errors import ValidationFailed, django_validation
from simia_web.core.services import audit_record

from .models import DEFAULT_WORKSPACE, Membership, Role, User, Workspace
from .oidc import Grants, SignInRefused, grants_for, groups_from


def _role_check(role: str) -> None:
    if role not in Role.values:
        raise ValueError(f"Unknown role {role!r}; choose one of {', '.join(Role.values)}.")


# -- workspaces and memberships -----------------------------------------------------------------------------------
# `User.role` is the role in `User.current_workspace`: every function here that changes either keeps it in step.


def workspace_default() -> Workspace:
    """The `default` workspace, where data and people go when no workspace is named."""
    workspace, _ = Workspace.objects.get_or_create(slug=DEFAULT_WORKSPACE, defaults={"name": "Default"})
    return workspace


def workspace_get(*, slug: str) -> Workspace:
    workspace = Workspace.objects.filter(slug=slug).first()
    if workspace is None:
        raise ValidationFailed(f"No workspace {slug!r}.", field="workspace")
    return workspace


@transaction.atomic
def workspace_create(*, slug: str, name: str = "", actor=None) -> Workspace:
    if Workspace.objects.filter(slug=slug).exists():
        raise ValidationFailed(f"A workspace {slug!r} exists already.", field="slug")
    workspace = Workspace(slug=slug, name=name or slug)
    with django_validation():
        workspace.full_clean()
    workspace.save()
    audit_record(
        actor=actor, action="workspace.create", target=workspace, workspace=workspace, data={"name": workspace.name}
    )
    return workspace


def _workspace_settings_set(*, workspace: Workspace, action: str, actor, **values) -> Workspace:
    """Write the workspace settings `values` (field=value) and log what they were and are (one setting as its
    value, several by field); nothing is written or logged when nothing changes."""
    before = {name: getattr(workspace, name) for name in values}
    if before == values:
        return workspace
    Workspace.objects.filter(pk=workspace.pk).update(**values)
    for name, value in values.items():
        setattr(workspace, name, value)

    def shown(settings: dict):
        return next(iter(settings.values())) if len(settings) == 1 else settings

    audit_record(
        actor=actor,
        action=action,
        target=workspace,
        data={"from": shown(before), "to": shown(values)},
        workspace=workspace,
    )
    return workspace


def workspace_review_stage_set(*, workspace: Workspace, on: bool, actor) -> Workspace:
    """Switch the workspace's reviewer stage on or off (its domains follow unless they say otherwise)."""
    return _workspace_settings_set(workspace=workspace, action="workspace.review_stage", actor=actor, review_stage=on)


def workspace_gold_rate_set(*, workspace: Workspace, rate: float, actor) -> Workspace:
    """Set the share of the review stream given to gold items the annotator has not answered (0 to 1)."""
    if not 0.0 <= rate <= 1.0:
        raise ValidationFailed("The gold rate is a share from 0 to 1.", field="gold_rate")
    return _workspace_settings_set(workspace=workspace, action="workspace.gold_rate", actor=actor, gold_rate=rate)


def workspace_qualification_set(*, workspace: Workspace, accuracy: float | None, window: int, actor) -> Workspace:
    """Ask annotators for a gold accuracy (0 to 1) over their last `window` gold answers before their decisions count
    without review; None asks none."""
    if accuracy is not None and not 0.0 <= accuracy <= 1.0:
        raise ValidationFailed("The qualifying accuracy is a share from 0 to 1.", field="qualify_accuracy")
    if not 1 <= window <= 1000:
        raise ValidationFailed("The window is 1 to 1000 gold answers.", field="qualify_window")
    return _workspace_settings_set(
        workspace=workspace,
        action="workspace.qualification",
        actor=actor,
        qualify_accuracy=accuracy,
        qualify_window=window,
    )


def _user_role_sync(user: User) -> None:
    """Point the user at a workspace they belong to (their current one if they still do) and copy its role."""
    memberships = Membership.objects.filter(user=user).select_related("workspace").order_by("workspace__slug")
    here = memberships.filter(workspace_id=user.current_workspace_id) if user.current_workspace_id else memberships
    current = here.first() or memberships.first()
    if current is not None:
        user.current_workspace, user.role = current.workspace, current.role
    elif user.is_site_admin and user.current_workspace_id is not None:
        user.role = Role.ADMIN  # a site administrator acts as an admin wherever they look
    else:
        user.current_workspace, user.role = None, ""
    user.save(update_fields=["current_workspace", "role"])


@transaction.atomic
def membership_set(*, workspace: Workspace, user: User, role: str, actor=None) -> Membership:
    """Give `user` the role `role` in `workspace` (a new membership, or another role); audit-logged."""
    _role_check(role)
    membership = Membership.objects.select_for_update().filter(workspace=workspace, user=user).first()
    before = membership.role if membership else None
    if membership is None:
        membership = Membership.objects.create(workspace=workspace, user=user, role=role)
    elif membership.role != role:
        membership.role = role
        membership.save(update_fields=["role"])
    if before != role:
        audit_record(
            actor=actor,
            action="membership.grant" if before is None else "membership.role",
            target=user,
            workspace=workspace,
            data={"workspace": workspace.slug, "username": user.username, "from": before, "to": role},
        )
    if user.current_workspace_id in (None, workspace.pk):
        user.current_workspace = workspace
    _user_role_sync(user)
    return membership


@transaction.atomic
def membership_remove(*, workspace: Workspace, user: User, actor=None) -> bool:
    """Take `user` out of `workspace`; their current workspace moves to another they belong to. False when they
    were not a member."""
    membership = Membership.objects.select_for_update().filter(workspace=workspace, user=user).first()
    if membership is None:
        return False
    membership.delete()
    audit_record(
        actor=actor,
        action="membership.revoke",
        target=user,
        workspace=workspace,
        data={"workspace": workspace.slug, "username": user.username, "from": membership.role, "to": None},
    )
    if user.current_workspace_id == workspace.pk and not user.is_site_admin:
        user.current_workspace = None
    _user_role_sync(user)
    return True


@transaction.atomic
def workspace_switch(*, user: User, workspace: Workspace) -> User:
    """Make `workspace` the user's current one (remembered for their next visits); members and site
    administrators only."""
    if not user.is_site_admin and not Membership.objects.filter(user=user, workspace=workspace).exists():
        raise ValidationFailed("You are not a member of this workspace.", field="workspace")
    user.current_workspace = workspace
    _user_role_sync(user)
    return user


def _memberships_initial(*, user: User, role: str, workspaces: list[str] | None, actor) -> None:
    targets = [workspace_get(slug=slug) for slug in workspaces] if workspaces else [workspace_default()]
    for workspace in targets:
        membership_set(workspace=workspace, user=user, role=role, actor=actor)
    user.current_workspace = targets[0]
    _user_role_sync(user)


@transaction.atomic
def user_create(
    *,
    username: str,
    role: str,
    password: str,
    actor=None,
    email: str = "",
    workspaces: list[str] | None = None,
    site_admin: bool = False,
) -> User:
    """A user with `role` in each of `workspaces` (by slug; the `default` workspace when none is named)."""
    _role_check(role)
    user = User(username=username, role=role, email=email, is_site_admin=site_admin)
    with django_validation():
        user.full_clean(exclude=["password"])
    with django_validation(field="password"):
        validate_password(password, user)  # the same length and similarity rules as the password forms
    user.set_password(password)
    user.save()
    audit_record(actor=actor, action="user.create", target=user, data={"role": role, "site_admin": site_admin})
    _memberships_initial(user=user, role=role, workspaces=workspaces, actor=actor)
    return user


@transaction.atomic
def user_role_set(*, user: User, role: str, actor=None) -> User:
    """Give the user another role in their current workspace (the `default` one if they have none)."""
    _role_check(role)
    before = user.role
    workspace = user.current_workspace or workspace_default()
    user.role = role
    user.save(update_fields=["role"])
    audit_record(actor=actor, action="user.role", target=user, workspace=workspace, data={"from": before, "to": role})
    membership_set(workspace=workspace, user=user, role=role, actor=actor)
    return user


@transaction.atomic
def user_site_admin_set(*, user: User, site_admin: bool, actor=None) -> User:
    before = user.is_site_admin
    if before != site_admin:
        user.is_site_admin = site_admin
        user.save(update_fields=["is_site_admin"])
        audit_record(actor=actor, action="user.site_admin", target=user, data={"from": before, "to": site_admin})
        user.refresh_from_db(fields=["is_staff", "is_superuser"])
    return user


def user_token(*, user: User) -> str:
    token, _ = Token.objects.get_or_create(user=user)
    return token.key


# -- users as admins manage them on the Users page ---------------------------------------------------------------


def _last_admin_check(*, user: User, workspace: Workspace | None, role: str, is_active: bool) -> None:
    """Refuse a change that would leave the workspace (or, without one, the site) with no active admin: nobody could
    then manage its users or endpoints. Site administrators count as admins everywhere."""
    before = Membership.objects.filter(workspace=workspace, user=user).values_list("role", flat=True).first()
    if (before if workspace is not None else user.role) != Role.ADMIN or (role == Role.ADMIN and is_active):
        return
    admins = User.objects.filter(is_active=True).exclude(pk=user.pk)
    if workspace is not None:
        others = admins.filter(memberships__workspace=workspace, memberships__role=Role.ADMIN)
    else:
        others = admins.filter(role=Role.ADMIN)
    if not (others.exists() or admins.filter(is_site_admin=True).exists()):
        raise ValidationFailed(
            "This is the only active admin: make another user an admin first, or nobody can manage users.", field="role"
        )


@transaction.atomic
def user_invite(*, username: str, role: str, actor, email: str = "", workspaces: list[str] | None = None) -> User:
    """A user without a password yet: they choose one through the link of `user_password_link`."""
    _role_check(role)
    user = User(username=username, role=role, email=email)
    with django_validation():
        user.full_clean(exclude=["password"])
    user.set_unusable_password()
    user.save()
    audit_record(actor=actor, action="user.invite", target=user, data={"role": role})
    _memberships_initial(user=user, role=role, workspaces=workspaces, actor=actor)
    return user


def user_password_link(*, user: User) -> tuple[str, str]:
    """(uidb64, token) of a one-time link where the user sets their password (valid PASSWORD_RESET_TIMEOUT seconds,
    and only until the password changes)."""
    return urlsafe_base64_encode(force_bytes(user.pk)), default_token_generator.make_token(user)


@transaction.atomic
def user_update(
    *, user: User, role: str, is_active: bool, email: str, actor, workspace: Workspace | None = None
) -> User:
    """Change a user's role in `workspace` (their current one when None), e-mail address and whether they can log
    in; never the last active admin's."""
    _role_check(role)
    if actor is not None and user.pk == actor.pk and not is_active:
        raise ValidationFailed("You cannot deactivate yourself: ask another admin.", field="is_active")
    _last_admin_check(user=user, workspace=workspace, role=role, is_active=is_active)
    if workspace is not None:
        membership_set(workspace=workspace, user=user, role=role, actor=actor)
        user.refresh_from_db(fields=["role", "current_workspace"])
    elif role != user.role:
        user_role_set(user=user, role=role, actor=actor)
    changes: dict[str, str | bool] = {}
    if email != user.email:
        user.email = email
        with django_validation():
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
    with django_validation(field="password"):
        validate_password(password, user)
    user.set_password(password)
    user.save(update_fields=["password"])
    audit_record(actor=actor, action="user.password", target=user, data={})
    return user


# -- single sign-on --------------------------------------------------------------------------------------------------

_USERNAME = re.compile(r"^[\w.@+-]{1,150}\Z")


def _oidc_username(claims: dict) -> str:
    for name in ("preferred_username", "email"):
        value = str(claims.get(name) or "")
        if value and _USERNAME.match(value):
            return value
    raise SignInRefused("no_username", "The identity provider sent neither a usable preferred_username nor an email.")


def _oidc_memberships_sync(*, user: User, grants: Grants) -> None:
    """Memberships in the workspaces the role map names follow the groups: a group added grants, a group removed
    revokes. Memberships in other workspaces are managed by hand and left alone."""
    current = {m.workspace.slug: m for m in Membership.objects.filter(user=user).select_related("workspace")}
    for slug in sorted(grants.managed | set(grants.roles)):
        role = grants.roles.get(slug)
        if role and (slug not in current or current[slug].role != role):
            workspace, _ = Workspace.objects.get_or_create(slug=slug, defaults={"name": slug})
            membership_set(workspace=workspace, user=user, role=role)
        elif not role and slug in current:
            membership_remove(workspace=current[slug].workspace, user=user)
    if grants.manages_site_admin:
        user_site_admin_set(user=user, site_admin=grants.site_admin)


def oidc_sign_in(*, issuer: str, claims: dict) -> User:
    """The user the provider vouched for (`claims`: the ID token's, verified), created on their first sign-in,
    with their memberships set from their groups. Raises SignInRefused, creating no user, when no group of theirs
    is mapped (an existing user then loses the memberships the map manages)."""
    subject = str(claims.get("sub") or "")
    if not subject:
        raise SignInRefused("no_subject", "The identity provider sent no subject (sub) for this account.")
    grants = grants_for(groups_from(claims))
    with transaction.atomic():
        user = User.objects.select_for_update().filter(oidc_issuer=issuer, oidc_subject=subject).first()
        if user is not None:
            _oidc_memberships_sync(user=user, grants=grants)
    if not grants.roles and not grants.site_admin:
        groups = ", ".join(groups_from(claims)) or "none"
        raise SignInRefused(
            "no_mapped_group",
            f"Your account is in no group that gives access to Simia Web (your groups: {groups}). Ask your "
            "administrator to add you to a group named in SIMIA_OIDC_ROLE_MAP.",
        )
    with transaction.atomic():
        if user is None:
            username = _oidc_username(claims)
            if User.objects.filter(username__iexact=username).exists():
                raise SignInRefused(
                    "username_taken",
                    f"A local account named {username!r} exists already and is not linked to this identity: "
                    "ask an administrator to rename or remove it.",
                )
            user = User(username=username, email=str(claims.get("email") or ""), role="")
            user.oidc_issuer, user.oidc_subject = issuer, subject
            user.set_unusable_password()
            with django_validation():
                user.full_clean(exclude=["password"])
            user.save()
            audit_record(actor=None, action="user.create", target=user, data={"via": "oidc", "issuer": issuer})
            _oidc_memberships_sync(user=user, grants=grants)
        if not user.is_active:
            raise SignInRefused("inactive", "This account is deactivated: ask an administrator.")
        user.refresh_from_db()
    return user
