"""Every page and REST route answered as an admin, with data in every feature, on whichever database Django uses: a
500 anywhere is a failure, for a read or for an empty write. tests/core/test_backend_parity.py runs it in-process on
PostgreSQL and, through `python -m tests.support.route_walk`, on a fresh SQLite file (the embedded default), so a query
only one backend runs is caught.

Routes come from the URL resolver; the REST list routes are walked again with each query parameter the OpenAPI schema
documents for them (every choice of a choice, a sample value otherwise), so filters and sorts run on both backends.
"""

import json
import os
import sys

from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, reverse

# Not walked: the Django admin (its own app), the auth views (public), /metrics (a scrape token, not a session).
SKIPPED_NAMESPACES = {"admin"}
SKIPPED_ROUTES = {"login", "logout", "metrics"}
# Writes are sent last, so that what they change or refuse does not touch the reads; a DELETE is not sent.
WRITES = ("POST", "PUT", "PATCH")
WRITE_TYPES = {"api": "application/json", "page": "application/x-www-form-urlencoded"}
SAMPLES = {"integer": "1", "number": "0.5", "boolean": "true", "string": "a"}
SAMPLE_FORMATS = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "uuid": "12345678-1234-4234-8234-1234567890ab",
}


def _patterns(resolver, namespace=None):
    for entry in resolver.url_patterns:
        if isinstance(entry, URLResolver):
            yield from _patterns(entry, entry.namespace or namespace)
        elif isinstance(entry, URLPattern):
            yield namespace, entry


def feature_data(users: dict) -> dict:
    """Objects for every route's URL (the access matrix's) plus what the pages show when features hold data: a rating
    and a judge verdict on the same item (the agreement figures), an accepted review, and a near-duplicate cluster."""
    from simia_web.catalog.services import domain_ensure
    from simia_web.curation.services import review_decide, trajectory_create
    from tests.accounts.test_access_matrix import route_objects
    from tests.support.factories import TOOLS, conversation

    objects = route_objects(users)
    text = "Please cancel order W1 and refund it to the card it was paid with, the one ending in 4242, today."
    pair = [
        trajectory_create(
            violations=[], kind="rollout", domain=domain_ensure(name="shop"), messages=conversation(said), tools=TOOLS
        )
        for said in (text, text.replace("today", "now"))
    ]
    review_decide(trajectory=pair[0], reviewer=users["curator"], decision="accept", expected_version=1)
    return {**objects, "near_duplicates": pair}


def _routes(method: str) -> list[tuple[str, object]]:
    """The routes that answer `method` (by the access matrix's table), but those the walk leaves out."""
    from tests.accounts.test_access_matrix import ROUTES

    routes = []
    for namespace, pattern in _patterns(get_resolver()):
        if namespace in SKIPPED_NAMESPACES or pattern.name in SKIPPED_ROUTES:
            continue
        route = ROUTES.get(pattern.name)
        if route is not None and method in route.methods:
            routes.append((pattern.name, route))
    return routes


def _query_samples(parameter: dict) -> list[str]:
    schema = parameter.get("schema", {})
    if schema.get("type") == "array":
        schema = schema.get("items", {})
    if "enum" in schema:
        return [str(value) for value in schema["enum"] if value is not None]
    return [SAMPLE_FORMATS.get(schema.get("format", ""), SAMPLES.get(schema.get("type", "string"), "a"))]


def walk(client: Client, objects: dict) -> list[str]:
    """GET every route as the client's user, then every documented query parameter of the REST routes, then send every
    write route an empty body (a refusal is fine, a 500 is not); the failures ("GET url -> 500")."""
    from tests.accounts.test_access_matrix import route_url

    failures = []
    for name, route in _routes("GET"):
        url = route_url(name, route, objects)
        status = client.get(url).status_code
        if status >= 500:
            failures.append(f"GET {url} -> {status}")
    schema = json.loads(client.get(reverse("api-schema"), {"format": "json"}).content)
    for path, operations in schema["paths"].items():
        if "{" in path or "get" not in operations:
            continue  # detail routes are walked above with their objects
        for parameter in operations["get"].get("parameters", []):
            if parameter.get("in") != "query":
                continue
            for value in _query_samples(parameter):
                status = client.get(path, {parameter["name"]: value}).status_code
                if status >= 500:
                    failures.append(f"GET {path}?{parameter['name']}={value} -> {status}")
    for method in WRITES:
        for name, route in _routes(method):
            url = route_url(name, route, objects)
            body = b"{}" if route.kind == "api" else b""
            status = client.generic(method, url, data=body, content_type=WRITE_TYPES[route.kind]).status_code
            if status >= 500:
                failures.append(f"{method} {url} -> {status}")
    return failures


def main() -> int:
    """Migrate the database in DATABASE_URL, fill it and walk it; print the failures as JSON."""
    import django
    from django.core.management import call_command
    from django.test.utils import setup_test_environment

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")
    django.setup()
    setup_test_environment()  # the test client's host, and its in-memory mail
    call_command("migrate", verbosity=0)
    from simia_web.accounts.services import user_create

    roles = ("annotator", "curator", "admin")
    users = {role: user_create(username=role, role=role, password="correct-horse-9") for role in roles}
    client = Client()
    client.force_login(users["admin"])
    failures = walk(client, feature_data(users))
    print(json.dumps({"routes": len(_routes("GET")), "failures": failures}))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
