"""Nothing of one workspace reaches a member of another. Every page and REST route, taken from the URL resolver, and
every REST list with each query parameter the OpenAPI schema documents, is walked as an admin of a second workspace
while all the data lives in the first:

- a route that names the first workspace's object answers 404, whatever the method (never 403: nobody learns that
  the object exists);
- a list answers, and shows none of the first workspace's rows.

A new route that forgets its workspace fails here.
"""

import json

import pytest
from django.urls import reverse

from simia_web.accounts.services import user_create, workspace_create
from simia_web.catalog.models import Domain
from tests.accounts.test_access_matrix import ROUTES, route_url
from tests.support.route_walk import WRITE_TYPES, _query_samples, _routes, feature_data

OTHER = "team-b"  # the workspace the walk is made from
# Objects of the deployment rather than of a team: anyone with the route's role reaches them from any workspace.
DEPLOYMENT_WIDE_KWARGS = {"profile", "kind"}
# REST reads that are not a team's rows: the caller, their workspaces, the schema, the deployment's endpoints.
DEPLOYMENT_WIDE_LISTS = ("/me", "/workspaces", "/schema", "/docs", "/llm/profiles")
# What the first workspace's data says on a page that lists it.
MARKERS = ("Please cancel order W1", "127.0.0.1:9/hook")


@pytest.fixture
def world(db, users):
    objects = feature_data(users)
    workspace_create(slug=OTHER, name="Team B")
    outsider = user_create(username="outsider", role="admin", password="correct-horse-9", workspaces=[OTHER])
    domains = list(Domain.objects.values_list("name", flat=True))
    return objects, outsider, domains


def _object_routes():
    return [
        (name, route)
        for name, route in ROUTES.items()
        if route.kwargs and not set(route.kwargs.values()) & DEPLOYMENT_WIDE_KWARGS
    ]


def _list_routes():
    return [(name, route) for name, route in _routes("GET") if not route.kwargs]


def test_another_workspaces_objects_are_not_found_by_any_route_or_method(client, world):
    objects, outsider, _ = world
    client.force_login(outsider)
    leaks = []
    for name, route in _object_routes():
        url = route_url(name, route, objects)
        for method in route.methods:
            body = b"{}" if route.kind == "api" and method != "GET" else b""
            status = client.generic(method, url, data=body, content_type=WRITE_TYPES[route.kind]).status_code
            if status != 404:
                leaks.append(f"{method} {url} ({name}) -> {status}")
    assert not leaks, "routes that answer about another workspace's objects:\n" + "\n".join(leaks)


def _shows(content: bytes, domains: list[str]) -> list[str]:
    text = content.decode(errors="replace")
    return [marker for marker in (*MARKERS, *(f">{d}<" for d in domains)) if marker in text]


def _rows_of(payload) -> list:
    """The listed rows that are not the second workspace's own (a row that names its workspace says so)."""
    rows = payload.get("results", payload.get("items")) if isinstance(payload, dict) else payload
    if not isinstance(rows, list):
        return []
    return [row for row in rows if not (isinstance(row, dict) and row.get("workspace") == OTHER)]


def test_lists_show_nothing_of_another_workspace(client, world):
    objects, outsider, domains = world
    client.force_login(outsider)
    leaks = []
    for name, route in _list_routes():
        url = route_url(name, route, objects)
        response = client.get(url)
        if response.status_code != 200:
            continue  # a list that needs a query (refused) shows nothing either
        if route.kind == "page":
            shown = _shows(response.content, domains)
            if shown:
                leaks.append(f"GET {url} ({name}) shows {shown}")
        elif not url.rstrip("/").endswith(DEPLOYMENT_WIDE_LISTS):
            rows = _rows_of(json.loads(response.content))
            if rows:
                leaks.append(f"GET {url} ({name}) lists {len(rows)} rows")
    assert not leaks, "lists that show another workspace's rows:\n" + "\n".join(leaks)


def test_rest_lists_filtered_by_every_documented_parameter_show_nothing_of_another_workspace(client, world):
    objects, outsider, domains = world
    client.force_login(outsider)
    schema = json.loads(client.get(reverse("api-schema"), {"format": "json"}).content)
    leaks = []
    for path, operations in schema["paths"].items():
        if "{" in path or "get" not in operations or path.rstrip("/").endswith(DEPLOYMENT_WIDE_LISTS):
            continue
        for parameter in operations["get"].get("parameters", []):
            if parameter.get("in") != "query":
                continue
            samples = _query_samples(parameter)
            if parameter["name"] == "domain":
                samples = [*samples, *domains]
            for value in samples:
                response = client.get(path, {parameter["name"]: value})
                if response.status_code == 200 and _rows_of(json.loads(response.content)):
                    leaks.append(f"GET {path}?{parameter['name']}={value}")
    assert not leaks, "filtered lists that show another workspace's rows:\n" + "\n".join(leaks)


def test_no_queue_page_offers_another_workspaces_domains(client, world):
    from simia_web.jobs.kinds import job_kinds_queueable

    _, outsider, domains = world
    client.force_login(outsider)
    leaks = []
    for kind in job_kinds_queueable().values():
        response = client.get(reverse("job-queue", kwargs={"slug": kind.page_slug}))
        text = response.content.decode(errors="replace")
        shown = [name for name in domains if f">{name}<" in text or f'value="{name}"' in text]
        if response.status_code != 200 or shown:
            leaks.append(f"/queue/{kind.page_slug}/ -> {response.status_code} {shown}")
    assert not leaks, "queue pages that offer another workspace's domains:\n" + "\n".join(leaks)
