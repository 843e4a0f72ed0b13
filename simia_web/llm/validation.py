"""What an endpoint profile may hold: a base URL without credentials in it, that does not point at a link-local
or cloud metadata address (workers would send there whatever the profile asks, the way to a machine's instance
credentials), unless SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS; and the name of an environment variable that is meant
to hold an API key (never SECRET_KEY, DATABASE_URL and the like, which a profile pointing at a server its author
controls would otherwise send as `Authorization: Bearer <value>`)."""

import ipaddress
import logging
import os
import re
import socket
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from django.conf import settings

logger = logging.getLogger(__name__)

KEY_ENV_PATTERN = re.compile(r"[A-Z][A-Z0-9_]*_API_KEY")
# Never sent, even when listed in SIMIA_ALLOWED_KEY_ENVS.
FORBIDDEN_KEY_ENVS = frozenset(
    {"SECRET_KEY", "DATABASE_URL", "CELERY_BROKER_URL", "SIMIA_CACHE_URL", "SIMIA_ADMIN_PASSWORD"}
)
# Query parameters that carry a credential (Azure's `api-version` does not; `api-key`, `sig`, `token` do).
SECRET_PARAMETER = re.compile(r"key|token|secret|passw|sig|auth|credential|session", re.IGNORECASE)
REDACTED = "***"
# Cloud metadata services by name, and those outside 169.254.0.0/16 by address (Alibaba, AWS over IPv6, Oracle).
METADATA_HOSTS = frozenset({"metadata", "metadata.google.internal", "metadata.goog", "instance-data"})
METADATA_ADDRESSES = frozenset(map(ipaddress.ip_address, ("100.100.100.200", "fd00:ec2::254", "192.0.0.192")))


def host_addresses(host: str) -> set:
    """The addresses `host` stands for: an address in any of its spellings (2852039166 is 169.254.169.254), or
    what the name resolves to here (nothing, when it does not resolve: the workers may see other names)."""
    try:
        found = socket.getaddrinfo(host.split("%")[0], None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return set()
    addresses = {ipaddress.ip_address(str(info[4][0]).split("%")[0]) for info in found}
    return {getattr(address, "ipv4_mapped", None) or address for address in addresses}


def url_address_problem(url: str, addresses: set | None = None) -> str | None:
    """What `url`'s host is when nothing may be sent there (a link-local or metadata address), worded to follow "must
    not point at", or None. `addresses`: what the host resolved to, when the caller resolved it already."""
    host = (urlsplit(url).hostname or "").rstrip(".")
    if not host or settings.SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS:
        return None
    if host in METADATA_HOSTS:
        return f"{host}, a cloud metadata service"
    for address in sorted(host_addresses(host) if addresses is None else addresses, key=str):
        if address.is_link_local or address in METADATA_ADDRESSES:
            if host == str(address):
                return f"{host}, a link-local or cloud metadata address"
            return f"{host}, which resolves to a link-local or cloud metadata address ({address})"
    return None


def url_credentials(url: str) -> list[str]:
    """The parts of `url` that carry a credential: its user info and secret-looking query parameters."""
    parts = urlsplit(url)
    found = ["user:password@"] if parts.username or parts.password else []
    found += [name for name, _ in parse_qsl(parts.query, keep_blank_values=True) if SECRET_PARAMETER.search(name)]
    return found


def url_redacted(url: str) -> str:
    """`url` with its user info and secret-looking query values replaced, for display."""
    parts = urlsplit(url)
    if not url_credentials(url):
        return url
    host = parts.hostname or ""
    netloc = f"{REDACTED}@{host}" if parts.username or parts.password else host
    if parts.port:
        netloc += f":{parts.port}"
    query = [
        (name, REDACTED if SECRET_PARAMETER.search(name) else value)
        for name, value in parse_qsl(parts.query, keep_blank_values=True)
    ]
    return urlunsplit((parts.scheme, netloc, parts.path, urlencode(query, safe="*"), ""))


def api_key_env_allowed(name: str) -> bool:
    if name in FORBIDDEN_KEY_ENVS:
        return False
    return bool(KEY_ENV_PATTERN.fullmatch(name)) or name in settings.SIMIA_ALLOWED_KEY_ENVS


def api_key_read(name: str) -> str:
    """The key in environment variable `name`, or "" when a profile may not name that variable."""
    if not api_key_env_allowed(name):
        logger.warning("endpoint profile names %r as its key variable, which is not allowed; no key is sent", name)
        return ""
    return os.environ.get(name, "")


def profile_problems(*, base_url: str, api_key_env: str) -> dict[str, str]:
    """What is not allowed in a profile's URL or key variable, by field (nothing when both are fine)."""
    errors = {}
    credentials = url_credentials(base_url or "")
    if credentials:
        errors["base_url"] = (
            f"must not contain credentials ({', '.join(credentials)}): put the key in an environment variable "
            "and name it in the key variable field"
        )
    elif address := url_address_problem(base_url or ""):
        errors["base_url"] = f"must not point at {address} (SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS allows it)"
    if not api_key_env_allowed(api_key_env or ""):
        errors["api_key_env"] = (
            "must name a variable ending in _API_KEY (or one listed in SIMIA_ALLOWED_KEY_ENVS); "
            f"{', '.join(sorted(FORBIDDEN_KEY_ENVS))} are never allowed"
        )
    return errors
