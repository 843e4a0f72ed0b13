"""The catalog per workspace: two teams each make domains, APIs, tasks and seeds (by page, REST and command) and see
only their own; another team's object is not found; a domain name another team has is refused without saying more."""

import json
from io import StringIO

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import membership_set, user_create, user_token, workspace_create
from simia_web.catalog.models import Api, Domain, DomainReference, Seed, Task
from tests.catalog.test_import import jsonl, openai_record

PASSWORD = "correct-horse-9"
PARAMETERS = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}


@pytest.fixture
def teams(db, users):
    """Team A is the `default` workspace (the `users` fixture's curator works there); team B has its own curator."""
    workspace_create(slug="team-b", name="Team B")
    curator_b = user_create(username="curator-b", role="curator", password=PASSWORD, workspaces=["team-b"])
    return {"a": users["curator"], "b": curator_b}


def _rest(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=user)}")
    return client


def _make(client, domain: str) -> None:
    """A domain, an API and a task made by form."""
    assert client.post("/domains/new/", {"name": domain, "description": f"{domain} things"}).status_code == 302
    api = {"domain": domain, "name": "get_order", "kind": "read", "parameters": json.dumps(PARAMETERS)}
    assert client.post("/apis/new/", api).status_code == 302
    task = {"domain": domain, "instruction": f"Find my {domain} order W1."}
    assert client.post("/tasks/new/", task).status_code == 302


def test_two_workspaces_each_make_and_see_only_their_own(teams):
    for team, domain in (("a", "shop"), ("b", "bank")):
        client = Client()
        client.force_login(teams[team])
        _make(client, domain)
        client.get("/domains/")  # the messages of what was made are shown, and go
    assert Domain.objects.get(name="shop").workspace.slug == "default"
    assert Domain.objects.get(name="bank").workspace.slug == "team-b"
    shop_api, shop_task = Api.objects.get(domain__name="shop"), Task.objects.get(domain__name="shop")
    for path in ("/domains/", "/apis/", "/tasks/", "/seeds/"):
        page = client.get(path).content.decode()
        assert "shop" not in page, path
    assert ">bank<" in client.get("/domains/").content.decode()
    for path in ("/domains/shop/", f"/apis/{shop_api.pk}/", f"/tasks/{shop_task.pk}/"):
        assert client.get(path).status_code == 404
        assert client.post(path, {"version": 1, "description": "mine now"}).status_code == 404
    assert client.post("/domains/shop/reference/", {"kind": "url", "location": "http://x/mcp"}).status_code == 404
    assert not DomainReference.objects.exists()

    api = _rest(teams["b"])
    for path in ("/api/v1/domains/", "/api/v1/apis/", "/api/v1/tasks/"):
        names = [row["domain"] if "domain" in row else row["name"] for row in api.get(path).json()["results"]]
        assert names == ["bank"], path
        assert api.get(path, {"domain": "shop", "q": "shop"}).json()["results"] == []
    assert api.get("/api/v1/domains/shop/").status_code == 404
    assert api.get(f"/api/v1/apis/{shop_api.pk}/").status_code == 404
    assert api.get(f"/api/v1/tasks/{shop_task.pk}/").status_code == 404
    assert api.get("/api/v1/domains/shop/reference/").status_code == 404
    assert api.put("/api/v1/domains/shop/reference/", {"url": "http://x/mcp"}, format="json").status_code == 404
    assert api.delete("/api/v1/domains/shop/reference/").status_code == 404


def test_a_member_of_both_lists_both_or_the_one_named(teams):
    membership_set(workspace=Workspace.objects.get(slug="team-b"), user=teams["a"], role="annotator")
    Domain.objects.create(name="shop")
    Domain.objects.create(name="bank", workspace=Workspace.objects.get(slug="team-b"))
    api = _rest(teams["a"])
    assert [row["name"] for row in api.get("/api/v1/domains/").json()["results"]] == ["bank", "shop"]
    assert [row["name"] for row in api.get("/api/v1/domains/?workspace=team-b").json()["results"]] == ["bank"]
    assert api.get("/api/v1/domains/?workspace=nowhere").status_code == 400
    # Text no slug could be (a NUL byte PostgreSQL refuses in a query) is refused the same way, not a 500.
    for not_a_slug in ("team\x00b", "team b", "ü"):
        assert api.get("/api/v1/domains/", {"workspace": not_a_slug}).status_code == 400, not_a_slug
    assert api.get("/api/v1/domains/bank/").status_code == 200
    # A write needs the role in the domain's own workspace: annotator in team B.
    refused = api.put("/api/v1/domains/bank/reference/", {"url": "http://127.0.0.1:9/mcp"}, format="json")
    assert refused.status_code == 403


def test_a_name_another_workspace_has_is_refused_without_more(client, teams):
    Domain.objects.create(name="shop", description="Team A's secret plans", policy="Never refund.")
    client.force_login(teams["b"])
    refused = client.post("/domains/new/", {"name": "shop"})
    assert refused.status_code == 400
    page = refused.content.decode()
    assert "is taken" in page and "secret" not in page and "open it" not in page
    assert Domain.objects.filter(name="shop").count() == 1
    # The create pages offer only the workspace's domains: another's cannot be chosen.
    api = {"domain": "shop", "name": "get_order", "kind": "read", "parameters": json.dumps(PARAMETERS)}
    assert client.post("/apis/new/", api).status_code == 400
    assert client.post("/tasks/new/", {"domain": "shop", "instruction": "Refund W1."}).status_code == 400
    assert not Api.objects.exists() and not Task.objects.exists()
    assert "shop" not in client.get("/apis/new/").content.decode()
    # An import into that name is refused the same way, writing nothing.
    upload = SimpleUploadedFile("s.jsonl", jsonl([openai_record(1)]).encode())
    response = client.post("/seeds/upload/", {"file": upload, "format": "openai", "domain": "shop"})
    assert response.status_code == 400 and "is taken" in response.content.decode()
    assert not Seed.objects.exists()


def test_seed_upload_goes_to_the_workspace(client, teams):
    client.force_login(teams["b"])
    upload = SimpleUploadedFile("s.jsonl", jsonl([openai_record(1)]).encode())
    assert client.post("/seeds/upload/", {"file": upload, "format": "openai", "domain": "bank"}).status_code == 200
    assert Seed.objects.get().domain.workspace.slug == "team-b"

    rest = _rest(teams["a"])
    upload = SimpleUploadedFile("s.jsonl", jsonl([openai_record(2)]).encode())
    made = rest.post("/api/v1/seeds/upload/", {"file": upload, "format": "openai", "domain": "shop"})
    assert made.status_code == 201
    assert Domain.objects.get(name="shop").workspace.slug == "default"
    upload = SimpleUploadedFile("s.jsonl", jsonl([openai_record(3)]).encode())
    elsewhere = {"file": upload, "format": "openai", "domain": "shop2", "workspace": "team-b"}
    assert rest.post("/api/v1/seeds/upload/", elsewhere).status_code == 400  # not a member of team B
    assert not Domain.objects.filter(name="shop2").exists()
    assert [row["domain"] for row in rest.get("/api/v1/seeds/").json()["results"]] == ["shop"]


def test_import_seeds_takes_the_workspace(teams, tmp_path):
    path = tmp_path / "seeds.jsonl"
    path.write_text(jsonl([openai_record(1)]))
    call_command("import_seeds", str(path), "--format", "openai", "--domain", "bank", "--workspace", "team-b",
                 stdout=StringIO())  # fmt: skip
    assert Domain.objects.get(name="bank").workspace.slug == "team-b"
    call_command("import_seeds", str(path), "--format", "openai", "--domain", "shop", stdout=StringIO())
    assert Domain.objects.get(name="shop").workspace.slug == "default"
    with pytest.raises(CommandError, match="is taken"):
        call_command("import_seeds", str(path), "--format", "openai", "--domain", "bank", stdout=StringIO())
    with pytest.raises(CommandError, match="No workspace"):
        call_command("import_seeds", str(path), "--format", "openai", "--workspace", "nowhere", stdout=StringIO())
    assert Seed.objects.count() == 2


def test_only_site_administrators_name_an_mcp_command(teams):
    """A command runs code on the server, whichever workspace names it: a workspace's admin may not."""
    admin_b = user_create(username="admin-b", role="admin", password=PASSWORD, workspaces=["team-b"])
    body = {"domain": "bank", "mcp_command": "python -c 'print(1)'"}
    refused = _rest(admin_b).post("/api/v1/apis/import/", body, format="json")
    assert refused.status_code == 403 and "site administrator" in refused.json()["detail"]
    Domain.objects.create(name="bank", workspace=Workspace.objects.get(slug="team-b"))
    reference = {"command": "python -c 'print(1)'"}
    put = _rest(admin_b).put("/api/v1/domains/bank/reference/", reference, format="json")
    assert put.status_code == 403
    assert not DomainReference.objects.exists()
