"""Sign-ins in the audit log: successful ones and refused ones, whatever the way in (password, admin site, OpenID)."""

import logging

from django.contrib.auth.signals import user_logged_in, user_login_failed
from django.dispatch import receiver

from simia_web.core.services import audit_record

logger = logging.getLogger("simia_web.accounts")


def client_address(request) -> str:
    return (request.META.get("REMOTE_ADDR") or "") if request is not None else ""


@receiver(user_logged_in, dispatch_uid="accounts-audit-sign-in")
def _signed_in(sender, request, user, **kwargs):
    method = getattr(request, "sign_in_method", "password")  # the OpenID callback marks its request
    audit_record(
        actor=user,
        action="sign_in",
        target=user,
        workspace=user.current_workspace,
        data={"method": method, "ip": client_address(request)},
    )


@receiver(user_login_failed, dispatch_uid="accounts-audit-sign-in-refused")
def _sign_in_refused(sender, credentials, request=None, **kwargs):
    username = str((credentials or {}).get("username") or "")[:150]
    sign_in_refused_record(request=request, method="password", reason="bad_credentials", username=username)


def sign_in_refused_record(*, request, method: str, reason: str, username: str = "", detail: str = "") -> None:
    """One refused sign-in: a log line and an audit event (no user is named: there may be none)."""
    address = client_address(request)
    logger.warning(
        "sign-in refused: method=%s reason=%s username=%r ip=%s %s", method, reason, username, address, detail
    )
    audit_record(
        actor=None,
        action="sign_in.refused",
        target=None,
        data={"method": method, "reason": reason, "username": username, "ip": address, "detail": detail[:500]},
    )
