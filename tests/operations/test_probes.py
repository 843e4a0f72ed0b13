"""/healthz and /readyz: cheap, public, answered whatever the Host header, and /readyz names the server that failed."""

import socket

import pytest
from django.core.cache import caches


def _closed_port() -> int:
    """A loopback port nothing listens on (bound, then let go)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_healthz_answers_without_the_database(client):
    response = client.get("/healthz")  # no `db` fixture: a query would raise
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}
    assert response["Cache-Control"] == "no-store"


def test_probes_answer_a_host_not_in_allowed_hosts_over_plain_http(client, db, settings):
    """Orchestrators ask by the machine's address, over plain HTTP, even where the site redirects to HTTPS."""
    settings.SECURE_SSL_REDIRECT = True
    for path in ("/healthz", "/readyz"):
        response = client.get(path, HTTP_HOST="10.1.2.3:8000")
        assert response.status_code == 200, (path, response.status_code)


def test_readyz_checks_database_broker_and_cache(client, db):
    response = client.get("/readyz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok", "checks": {"database": "ok", "broker": "ok", "cache": "ok"}}


def test_probes_are_not_throttled(client, db, settings):
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "DEFAULT_THROTTLE_RATES": {"anon": "2/minute"}}
    assert all(client.get("/readyz").status_code == 200 for _ in range(5))


def test_readyz_fails_when_the_broker_is_unreachable(client, db, settings):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    settings.CELERY_BROKER_URL = f"redis://127.0.0.1:{_closed_port()}/0"
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json() == {"status": "unavailable", "checks": {"database": "ok", "broker": "failed", "cache": "ok"}}
    assert "Retry-After" not in response  # its own answer, not the outage page


def test_readyz_fails_when_the_cache_redis_is_unreachable(client, db, settings):
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{_closed_port()}/0",
        }
    }
    try:
        response = client.get("/readyz")
    finally:
        caches["default"].close()
    assert response.status_code == 503
    assert response.json()["checks"] == {"database": "ok", "broker": "ok", "cache": "failed"}
