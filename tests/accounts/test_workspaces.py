"""Workspaces and memberships: the role in the current workspace is the role every check reads; commands, REST,
the switcher; membership changes are audit-logged."""

import io

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework.test import APIClient

from simia_web.accounts.models import Membership, Role, User, Workspace
from simia_web.accounts.services import membership_remove, membership_set, user_create, workspace_create
from simia_web.core.models import AuditEvent
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def _run(*args) -> str:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_commands_create_workspaces_and_manage_members():
    assert "Created workspace research (Research)." in _run("workspace", "create", "research", "--name", "Research")
    out = _run(
        "create_user",
        "dana",
        "--role",
        "curator",
        "--password",
        PASSWORD,
        "--workspace",
        "research",
        "--workspace",
        "default",
    )
    assert "Created curator dana in research, default." in out
    dana = User.objects.get(username="dana")
    assert dict(dana.memberships.values_list("workspace__slug", "role")) == {
        "research": "curator",
        "default": "curator",
    }
    assert dana.current_workspace.slug == "research" and dana.role == Role.CURATOR and not dana.is_site_admin

    assert "dana is annotator in research." in _run("workspace", "member", "research", "dana", "annotator")
    dana.refresh_from_db()
    assert dana.role == Role.ANNOTATOR  # the current workspace's role follows
    assert "dana removed from research." in _run("workspace", "remove", "research", "dana")
    dana.refresh_from_db()
    assert dana.current_workspace.slug == "default" and dana.role == Role.CURATOR
    actions = list(AuditEvent.objects.filter(target_id=str(dana.pk)).values_list("action", flat=True))
    assert {"membership.grant", "membership.role", "membership.revoke"} <= set(actions)
    with pytest.raises(CommandError, match="No workspace"):
        _run("workspace", "member", "nowhere", "dana", "admin")


def test_create_user_site_admin_and_ensure_admin(monkeypatch):
    _run("create_user", "root2", "--role", "admin", "--password", PASSWORD, "--site-admin")
    root = User.objects.get(username="root2")
    assert root.is_site_admin and root.is_superuser and root.memberships.get().workspace.slug == "default"
    monkeypatch.setenv("SIMIA_ADMIN_USER", "boss")
    monkeypatch.setenv("SIMIA_ADMIN_PASSWORD", "a-long-password-9")
    _run("ensure_admin")
    assert User.objects.get(username="boss").is_site_admin


def test_the_role_follows_the_current_workspace_and_the_switcher():
    workspace_create(slug="research", name="Research")
    eve = user_create(username="eve", role=Role.ANNOTATOR, password=PASSWORD)
    membership_set(workspace=Workspace.objects.get(slug="research"), user=eve, role=Role.ADMIN)
    client = APIClient()
    client.force_login(eve)
    assert client.get("/users/").status_code == 403  # an annotator in `default`, their current workspace
    page = client.get("/").content.decode()
    assert 'name="workspace"' in page and "Research" in page
    response = client.post("/workspaces/switch/", {"workspace": "research", "next": "/users/"})
    assert response.status_code == 302 and response["Location"] == "/users/"
    assert client.get("/users/").status_code == 200  # an admin in `research`
    eve.refresh_from_db()
    assert eve.current_workspace.slug == "research" and eve.role == Role.ADMIN
    workspace_create(slug="secret")
    assert client.post("/workspaces/switch/", {"workspace": "secret"}).status_code == 404


def test_rest_workspaces_and_members(users):
    site, curator = APIClient(), APIClient()
    site.force_login(users["admin"])
    curator.force_login(users["curator"])
    assert curator.post("/api/v1/workspaces/", {"slug": "x"}, format="json").status_code == 403
    created = site.post("/api/v1/workspaces/", {"slug": "research", "name": "Research"}, format="json")
    assert created.status_code == 201 and created.json()["slug"] == "research"
    assert site.post("/api/v1/workspaces/", {"slug": "research"}, format="json").status_code == 400
    assert [w["slug"] for w in curator.get("/api/v1/workspaces/").json()] == ["default"]
    assert curator.get("/api/v1/workspaces/research/members/").status_code == 404  # not theirs to see

    added = site.post("/api/v1/workspaces/research/members/", {"username": "curator", "role": "admin"}, format="json")
    assert added.status_code == 200
    # Now an admin of `research`, the curator manages its members, and still cannot manage `default`'s.
    members = curator.get("/api/v1/workspaces/research/members/").json()
    assert {"username": "curator", "role": "admin"} in members
    ok = curator.post(
        "/api/v1/workspaces/research/members/", {"username": "annotator", "role": "curator"}, format="json"
    )
    assert ok.status_code == 200
    assert curator.get("/api/v1/workspaces/default/members/").status_code == 403
    gone = curator.delete("/api/v1/workspaces/research/members/", {"username": "annotator"}, format="json")
    assert gone.status_code == 204
    assert not Membership.objects.filter(user=users["annotator"], workspace__slug="research").exists()
    bad = curator.post("/api/v1/workspaces/research/members/", {"username": "nobody", "role": "admin"}, format="json")
    assert bad.status_code == 400
    assert AuditEvent.objects.filter(action="membership.revoke", actor=users["curator"]).exists()


def test_removing_the_last_membership_leaves_no_role():
    frank = user_create(username="frank", role=Role.CURATOR, password=PASSWORD)
    membership_remove(workspace=Workspace.objects.get(slug="default"), user=frank)
    frank.refresh_from_db()
    assert frank.role == "" and frank.current_workspace is None and not frank.has_role(Role.ANNOTATOR)
    client = APIClient()
    client.force_login(frank)
    assert client.get("/api/v1/trajectories/").status_code == 403
