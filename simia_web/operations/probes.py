"""Health probes for load balancers and orchestrators: /healthz (the process answers) and /readyz (the database,
the broker and the cache answer too).

They are answered before any other middleware: no session, no database for /healthz, no host check (a probe
asks by the machine's address), no redirect to HTTPS (probes speak plain HTTP inside the network), no throttle,
and the outage middleware's 503 page is not theirs: /readyz says itself which server failed.
"""

import logging

from django.core.cache import cache
from django.db import connection
from django.http import JsonResponse

from .broker import queue_depths

logger = logging.getLogger(__name__)

HEALTHZ, READYZ = "/healthz", "/readyz"
OK, FAILED = "ok", "failed"


def _database() -> None:
    with connection.cursor() as cursor:
        cursor.execute("SELECT 1")


def _broker() -> None:
    queue_depths()


def _cache() -> None:
    cache.get("simia:readyz")


CHECKS = {"database": _database, "broker": _broker, "cache": _cache}


def readiness() -> dict[str, str]:
    """{server: "ok" or "failed"}; why one failed goes to the log, not to an unauthenticated client."""
    results = {}
    for name, check in CHECKS.items():
        try:
            check()
        except Exception as exc:  # any failure means not ready; the log says which and why
            logger.warning("readiness: the %s failed: %s: %s", name, type(exc).__name__, exc)
            results[name] = FAILED
        else:
            results[name] = OK
    return results


def _answer(status: int, body: dict) -> JsonResponse:
    response = JsonResponse(body, status=status)
    response["Cache-Control"] = "no-store"
    return response


class ProbeMiddleware:
    """Answers GET/HEAD /healthz and /readyz itself; first in MIDDLEWARE."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if request.method not in ("GET", "HEAD") or request.path not in (HEALTHZ, READYZ):
            return self.get_response(request)
        if request.path == HEALTHZ:
            return _answer(200, {"status": OK})
        checks = readiness()
        ready = all(result == OK for result in checks.values())
        return _answer(200 if ready else 503, {"status": OK if ready else "unavailable", "checks": checks})
