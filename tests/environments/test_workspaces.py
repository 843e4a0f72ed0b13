"""RL sessions per workspace: created on a task of the caller's workspace; another workspace's task, domain or group is
refused as a missing one, and its sessions are not found to list, read, step or abandon."""

import pytest

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import membership_set, user_create, user_token, workspace_create
from simia_web.environments.models import EnvSession
from tests.conftest import PASSWORD

from .conftest import CANCEL

URL = "/api/v1/envs/"


@pytest.fixture
def team_b(db, api_for):
    """A curator and an admin of a second workspace, where none of the shop's data is."""
    workspace_create(slug="team-b", name="Team B")
    made = {
        role: user_create(username=f"{role}-b", role=role, password=PASSWORD, workspaces=["team-b"])
        for role in ("curator", "admin")
    }
    return {role: api_for(token=user_token(user=user)) for role, user in made.items()} | {"users": made}


def test_another_workspaces_task_domain_and_group_are_not_there(shop, script, curator, team_b):
    task = shop["tasks"][0].pk
    mine = curator.post(URL, {"task": task, "group": "grpo-a"}, format="json")
    assert mine.status_code == 201
    outsider = team_b["curator"]
    for body, said in (
        ({"task": task}, f"no task with id {task}"),
        ({"domain": "shop"}, "no domain named 'shop'"),
        ({"group": "grpo-a"}, "the group key 'grpo-a' is taken: choose another"),
    ):
        refused = outsider.post(URL, body, format="json")
        assert refused.status_code == 400 and refused.json()["detail"] == said
    assert EnvSession.objects.count() == 1

    env_id = mine.json()["id"]
    for client in (team_b["curator"], team_b["admin"]):
        assert client.get(URL).json()["results"] == []
        assert client.get(URL, {"domain": "shop"}).json()["results"] == []
        assert client.get(f"{URL}{env_id}").status_code == 404
        assert client.post(f"{URL}{env_id}/step", {"message": CANCEL}, format="json").status_code == 404
        assert client.post(f"{URL}{env_id}/abandon", format="json").status_code == 404
    assert EnvSession.objects.get().step_count == 0 and not EnvSession.objects.get().done


def test_a_member_of_both_plays_in_each_with_its_role(shop, script, curator, team_b, users):
    default = Workspace.objects.get(slug="default")
    admin_b = team_b["users"]["admin"]
    membership_set(workspace=default, user=admin_b, role="annotator")
    mine = curator.post(URL, {"task": shop["tasks"][0].pk}, format="json").json()["id"]
    client = team_b["admin"]
    # An annotator of the shop's workspace sees the shop's session list (their own sessions only: none)...
    assert client.get(URL, {"workspace": "default"}).json()["results"] == []
    # ...and may not start one there, nor touch another's session.
    refused = client.post(URL, {"task": shop["tasks"][0].pk}, format="json")
    assert refused.status_code == 403 and refused.json()["error"] == "forbidden"
    assert client.post(f"{URL}{mine}/abandon", format="json").status_code == 404
    # As an admin there they see every session of it, and only of it when they name it.
    membership_set(workspace=default, user=admin_b, role="admin")
    assert [row["id"] for row in client.get(URL, {"workspace": "default"}).json()["results"]] == [mine]
    assert client.get(URL, {"workspace": "team-b"}).json()["results"] == []
    assert client.get(f"{URL}{mine}").status_code == 200
