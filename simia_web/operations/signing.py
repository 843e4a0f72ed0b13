"""Webhook signatures: `Simia-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>." + body, keyed by the secret>`.

A receiver recomputes v1 over the raw body it received, compares it in constant time and refuses a timestamp
further than a few minutes from its clock (a replayed delivery). Each attempt is signed afresh.

While a rotated secret's overlap lasts, the header carries one v1 per secret, the new one first
(`t=...,v1=<new>,v1=<old>`): a receiver that still holds the old secret accepts a delivery when any v1 matches,
and can switch to the new one at any moment of the overlap.
"""

import hashlib
import hmac

SIGNATURE_HEADER = "Simia-Signature"


def signature(secret: str, body: bytes, timestamp: int) -> str:
    signed = f"{timestamp}.".encode() + body
    return hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def signature_header(secret: str, body: bytes, timestamp: int, *older: str) -> str:
    return ",".join([f"t={timestamp}", *(f"v1={signature(key, body, timestamp)}" for key in (secret, *older))])
