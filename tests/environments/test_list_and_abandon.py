"""Listing sessions (scoping, filters, pagination) and abandoning an unfinished episode."""

from simia_web.accounts.services import user_create, user_token
from simia_web.curation.models import Trajectory, TrajectoryKind, TrajectoryStatus
from simia_web.environments.models import EnvSession
from tests.conftest import PASSWORD

from .conftest import tool_call

URL = "/api/v1/envs/"


def create(client, **body) -> str:
    response = client.post(URL, body, format="json")
    assert response.status_code == 201, response.content
    return response.json()["id"]


def listed(client, **params) -> list[dict]:
    response = client.get(URL, params)
    assert response.status_code == 200, response.content
    return response.json()["results"]


def abandon(client, env_id):
    return client.post(f"{URL}{env_id}/abandon", format="json")


def test_list_shows_own_sessions_and_admins_see_all(shop, script, curator, api_for, users):
    mine = create(curator, task=shop["tasks"][0].pk, group="g-1")
    admins = create(api_for("admin"), task=shop["tasks"][1].pk)
    other = user_create(username="curator2", role="curator", password=PASSWORD)
    theirs = create(api_for(token=user_token(user=other)), task=shop["tasks"][2].pk)

    [row] = listed(curator)
    assert row == {
        "id": mine,
        "task": shop["tasks"][0].pk,
        "domain": "shop",
        "group": "g-1",
        "done": False,
        "reward": None,
        "termination_reason": None,
        "steps": 0,
        "created_at": row["created_at"],
    }
    # Admins see every session, newest first.
    assert [r["id"] for r in listed(api_for("admin"))] == [theirs, admins, mine]


def test_list_filters_by_group_done_and_domain(shop, script, curator):
    grouped = [create(curator, domain="shop", group="grpo-1") for _ in range(2)]
    alone = create(curator, task=shop["tasks"][0].pk)
    assert abandon(curator, grouped[0]).status_code == 200

    assert {r["id"] for r in listed(curator, group="grpo-1")} == set(grouped)
    assert listed(curator, group="nope") == []
    assert [r["id"] for r in listed(curator, done="true")] == [grouped[0]]
    assert {r["id"] for r in listed(curator, done="false")} == {grouped[1], alone}
    assert len(listed(curator, domain="shop")) == 3
    assert listed(curator, domain="elsewhere") == []
    [ended] = listed(curator, done="true", group="grpo-1")
    assert ended["done"] is True and ended["termination_reason"] == "abandoned" and ended["reward"] is None
    assert curator.get(URL, {"group": "a\x00b"}).status_code == 400


def test_list_is_cursor_paginated(shop, script, curator):
    ids = [create(curator, task=shop["tasks"][0].pk) for _ in range(3)]
    first = curator.get(URL, {"page_size": 2}).json()
    assert [r["id"] for r in first["results"]] == ids[::-1][:2]
    second = curator.get(first["next"]).json()
    assert [r["id"] for r in second["results"]] == [ids[0]] and second["next"] is None


def test_abandon_stores_the_trajectory_without_judging(shop, script, curator, llm_stub):
    env_id = create(curator, task=shop["tasks"][0].pk)
    step = curator.post(f"{URL}{env_id}/step", {"message": tool_call("teleport", "{}")}, format="json")
    assert step.status_code == 200 and step.json()["done"] is False

    response = abandon(curator, env_id)
    assert response.status_code == 200, response.content
    result = response.json()
    assert result["done"] is True and result["reward"] is None
    assert result["termination_reason"] == "abandoned"
    assert result["observation"] == []
    info = result["info"]
    assert info["step"] == 1 and info["errors"] == 1 and info["judge"] is None and info["reward_breakdown"] == {}
    assert "unknown_tool" in {v["code"] for v in info["violations"]}
    assert llm_stub.stage_requests("judge") == []

    trajectory = Trajectory.objects.get(pk=info["trajectory"])
    assert trajectory.kind == TrajectoryKind.RL
    assert trajectory.termination_reason == "abandoned" and trajectory.reward is None
    assert trajectory.status == TrajectoryStatus.RULES_FAILED
    assert not trajectory.verdicts.exists()
    assert {v.code for v in trajectory.violations.all()} == {v["code"] for v in info["violations"]}
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool"]
    assert trajectory.provenance["env_session"] == env_id

    session = EnvSession.objects.get(pk=env_id)
    assert session.done and session.termination_reason == "abandoned" and session.finished_at is not None
    assert session.trajectory_id == trajectory.pk and session.reward is None
    state = curator.get(f"{URL}{env_id}").json()
    assert state["done"] is True and state["termination_reason"] == "abandoned" and state["trajectory"] == trajectory.pk


def test_abandoned_or_finished_sessions_cannot_be_abandoned_or_stepped(shop, script, curator):
    env_id = create(curator, task=shop["tasks"][0].pk)
    assert abandon(curator, env_id).status_code == 200
    again = abandon(curator, env_id)
    assert again.status_code == 409 and again.json()["error"] == "episode_finished"
    step = curator.post(f"{URL}{env_id}/step", {"message": {"content": "Hello?"}}, format="json")
    assert step.status_code == 409
    assert Trajectory.objects.filter(kind="rl").count() == 1

    finished = create(curator, task=shop["tasks"][0].pk)
    ended = curator.post(f"{URL}{finished}/step", {"message": {"content": "Done."}}, format="json").json()
    assert ended["done"] is True and ended["termination_reason"] == "user_done"
    response = abandon(curator, finished)
    assert response.status_code == 409
    assert EnvSession.objects.get(pk=finished).termination_reason == "user_done"


def test_another_curators_session_cannot_be_abandoned(shop, script, curator, api_for):
    env_id = create(curator, task=shop["tasks"][0].pk)
    other = user_create(username="curator2", role="curator", password=PASSWORD)
    response = abandon(api_for(token=user_token(user=other)), env_id)
    assert response.status_code == 404 and response.json()["error"] == "not_found"
    assert EnvSession.objects.get(pk=env_id).done is False
    assert not Trajectory.objects.exists()
    # Admins may end anyone's episode.
    assert abandon(api_for("admin"), env_id).status_code == 200


def test_annotators_and_anonymous_clients_are_refused(shop, script, api_for):
    env_id = create(api_for("curator"), task=shop["tasks"][0].pk)
    assert api_for("annotator").get(URL).status_code == 403
    assert abandon(api_for("annotator"), env_id).status_code == 403
    assert api_for().get(URL).status_code == 401
    assert abandon(api_for(), env_id).status_code == 401
