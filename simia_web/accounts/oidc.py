"""Single sign-on with an OpenID Connect provider (Authlib's Django client): the configuration read from the
settings, the client, and the mapping of the provider's groups to workspace roles."""

import json
from dataclasses import dataclass
from functools import cache

from authlib.integrations.django_client import OAuth
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from .models import ROLE_RANK, Role

SITE = "*"  # "*:admin" in the role map: a site administrator


class SignInRefused(Exception):
    """A sign-in the application refuses: `reason` is a short code for the log, `message` is for the person."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True)
class Grants:
    roles: dict[str, str]  # workspace slug → role
    site_admin: bool
    managed: frozenset[str]  # the workspaces the map names: memberships there follow the groups
    manages_site_admin: bool  # the map names "*:admin": the site administrator flag follows the groups


def oidc_enabled() -> bool:
    return bool(settings.SIMIA_OIDC_ISSUER and settings.SIMIA_OIDC_CLIENT_ID)


def role_map() -> dict[str, list[tuple[str, str]]]:
    """SIMIA_OIDC_ROLE_MAP parsed: group → [(workspace slug or "*", role)]."""
    try:
        raw = json.loads(settings.SIMIA_OIDC_ROLE_MAP or "{}")
    except ValueError as exc:
        raise ImproperlyConfigured(f"SIMIA_OIDC_ROLE_MAP is not JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ImproperlyConfigured('SIMIA_OIDC_ROLE_MAP must be a JSON object: {"group": ["WORKSPACE:ROLE", ...]}')
    parsed: dict[str, list[tuple[str, str]]] = {}
    for group, entries in raw.items():
        if isinstance(entries, str):
            entries = [entries]
        pairs = []
        for entry in entries:
            workspace, _, role = str(entry).rpartition(":")
            if not workspace or role not in Role.values or (workspace == SITE and role != Role.ADMIN):
                raise ImproperlyConfigured(
                    f'SIMIA_OIDC_ROLE_MAP[{group!r}]: {entry!r} is not "WORKSPACE:ROLE" (roles: '
                    f'{", ".join(Role.values)}; "*:admin" for a site administrator).'
                )
            pairs.append((workspace, role))
        parsed[str(group)] = pairs
    return parsed


def grants_for(groups: list[str]) -> Grants:
    """The roles the groups give, through the map; where several groups name one workspace, the highest role."""
    mapping = role_map()
    roles: dict[str, str] = {}
    site_admin = False
    for group in groups:
        for workspace, role in mapping.get(group, []):
            if workspace == SITE:
                site_admin = True
            elif ROLE_RANK[role] > ROLE_RANK.get(roles.get(workspace, ""), 0):
                roles[workspace] = role
    named = {workspace for pairs in mapping.values() for workspace, _ in pairs}
    return Grants(
        roles=roles, site_admin=site_admin, managed=frozenset(named - {SITE}), manages_site_admin=SITE in named
    )


def groups_from(claims: dict) -> list[str]:
    value = claims.get(settings.SIMIA_OIDC_GROUPS_CLAIM) or []
    if isinstance(value, str):
        value = [value]
    return [str(group) for group in value] if isinstance(value, list) else []


def discovery_url() -> str:
    return settings.SIMIA_OIDC_ISSUER.rstrip("/") + "/.well-known/openid-configuration"


@cache
def _client(issuer: str, client_id: str, client_secret: str, scopes: str):
    oauth = OAuth()
    return oauth.register(
        name="simia",
        client_id=client_id,
        client_secret=client_secret,
        server_metadata_url=discovery_url(),
        client_kwargs={"scope": scopes, "timeout": 10},
    )


def oidc_client():
    """The provider's client; its discovery document and keys are fetched once and kept."""
    return _client(
        settings.SIMIA_OIDC_ISSUER,
        settings.SIMIA_OIDC_CLIENT_ID,
        settings.SIMIA_OIDC_CLIENT_SECRET,
        settings.SIMIA_OIDC_SCOPES,
    )
