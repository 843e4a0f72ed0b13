"""API keys kept on an endpoint profile, encrypted at rest with Fernet (AES-128-CBC and HMAC-SHA256, from
`cryptography`), under a key derived with HKDF from SIMIA_SECRET_KEY_ENCRYPTION, or SECRET_KEY when that is unset.

A stored key is never sent back to a browser: pages and the API show it masked (its last four characters). A key
encrypted under a secret that has since changed cannot be read: the profile then sends none, and its page says to
enter the key again."""

import base64
import logging
import os

from cryptography.fernet import Fernet, InvalidToken
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings

from .models import EndpointProfile
from .validation import api_key_read

logger = logging.getLogger(__name__)

_INFO = b"simia-web endpoint profile API keys v1"
_fernets: dict[str, Fernet] = {}


def _fernet() -> Fernet:
    secret = getattr(settings, "SIMIA_SECRET_KEY_ENCRYPTION", "") or settings.SECRET_KEY
    if secret not in _fernets:
        derived = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_INFO).derive(secret.encode())
        _fernets[secret] = Fernet(base64.urlsafe_b64encode(derived))
    return _fernets[secret]


def api_key_encrypt(key: str) -> str:
    """The key as stored on a profile (empty for an empty key)."""
    return _fernet().encrypt(key.encode()).decode() if key else ""


def api_key_decrypt(token: str) -> str | None:
    """The stored key, "" when none is stored, None when it cannot be read (the secret changed)."""
    if not token:
        return ""
    try:
        return _fernet().decrypt(token.encode()).decode()
    except (InvalidToken, ValueError):
        return None


def profile_key_stored(profile: EndpointProfile) -> bool:
    """Whether the profile holds a key of its own (else it reads the variable it names)."""
    return bool(profile.api_key_encrypted) and not profile.follows_environment


def profile_api_key(profile: EndpointProfile) -> str:
    """The key the profile sends: its stored key, else the one in the environment variable it names."""
    if profile_key_stored(profile):
        key = api_key_decrypt(profile.api_key_encrypted)
        if key is None:
            logger.warning("endpoint profile %r: its stored API key cannot be decrypted; none is sent", profile.name)
            return ""
        return key
    return api_key_read(profile.api_key_env)


def profile_key_shown(profile: EndpointProfile) -> str:
    """Where the profile's key comes from, masked: never the key itself."""
    if profile_key_stored(profile):
        key = api_key_decrypt(profile.api_key_encrypted)
        if key is None:
            return "stored, but unreadable (the encryption secret changed): enter it again"
        return f"stored, encrypted (…{key[-4:]})" if len(key) >= 12 else "stored, encrypted"
    where = f"environment variable {profile.api_key_env}"
    return f"{where} (set)" if os.environ.get(profile.api_key_env) else f"{where} (not set on this machine)"
