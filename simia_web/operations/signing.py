"""Webhook signatures: `Simia-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body, keyed by the secret>`.

A receiver recomputes v1 over the raw body it received, compares it in constant time and refuses a timestamp
further than a few minutes from its clock (a replayed delivery). Each attempt is signed afresh.
"""

import hashlib
import hmac

SIGNATURE_HEADER = "Simia-Signature"


def signature(secret: str, body: bytes, timestamp: int) -> str:
    signed = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, timestamp: int) -> str:
    return f"t={timestamp},v1={signature(secret, body, timestamp)}"
