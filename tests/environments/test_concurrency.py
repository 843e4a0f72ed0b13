"""Many sessions stepped in parallel, and racing steps on one session, against real PostgreSQL."""

import threading

import pytest
from django.db import connection
from rest_framework.test import APIClient

from simia_web.accounts.services import user_token
from simia_web.environments.models import EnvSession
from simia_web.llm.models import LLMCall

from .conftest import CANCEL

URL = "/api/v1/envs/"

pytestmark = pytest.mark.skipif(
    connection.vendor != "postgresql", reason="row locks need PostgreSQL (run with DATABASE_URL=postgres://...)"
)


def run_threads(target, args_list):
    errors = []

    def wrapped(*args):
        try:
            target(*args)
        except Exception as exc:  # reported to the main thread
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=wrapped, args=args) for args in args_list]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors


def token_client(token):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    return client


def cancel_message(call_id):
    return {**CANCEL, "tool_calls": [{**CANCEL["tool_calls"][0], "id": call_id}]}


def test_parallel_sessions_are_independent(transactional_db, shop, script, llm_stub, users):
    llm_stub.latency = 0.05
    token = user_token(user=users["curator"])
    results = {}

    def episode(n):
        client = token_client(token)
        env = client.post(URL, {"domain": "shop", "group": "parallel"}, format="json").json()
        first = client.post(f"{URL}{env['id']}/step", {"message": cancel_message(f"call_{n}")}, format="json")
        assert first.status_code == 200, first.content
        last = client.post(f"{URL}{env['id']}/step", {"message": {"content": "Done."}}, format="json")
        assert last.status_code == 200, last.content
        results[n] = (env["id"], last.json())

    run_threads(episode, [(n,) for n in range(8)])
    assert len(results) == 8
    assert all(r["done"] and r["termination_reason"] == "user_done" for _, r in results.values())
    sessions = EnvSession.objects.filter(pk__in=[env_id for env_id, _ in results.values()])
    assert {s.task_id for s in sessions} == {sessions[0].task_id}
    for session in sessions:
        # Each session holds exactly its own calls: nothing leaked from a neighbour.
        assert [m["role"] for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
        assert session.step_count == 2 and session.trajectory_id is not None
    assert llm_stub.max_in_flight > 1  # the steps really overlapped


def test_racing_steps_on_one_session_keep_only_the_first_to_write(transactional_db, shop, script, llm_stub, users):
    llm_stub.latency = 0.2
    token = user_token(user=users["curator"])
    env_id = token_client(token).post(URL, {"task": shop["tasks"][0].pk}, format="json").json()["id"]
    codes = []

    def send(call_id):
        response = token_client(token).post(f"{URL}{env_id}/step", {"message": cancel_message(call_id)}, format="json")
        codes.append((response.status_code, response.json().get("error")))

    run_threads(send, [("call_a",), ("call_b",), ("call_c",)])
    # No lock is held while the simulator answers, so all three ran; the first to write won.
    assert sorted(codes) == [(200, None), (409, "concurrent_step"), (409, "concurrent_step")]
    session = EnvSession.objects.get(pk=env_id)
    assert session.step_count == 1 and session.version == 2
    assert [m["role"] for m in session.messages] == ["system", "user", "assistant", "tool"]
    assert session.messages[3]["tool_call_id"] == session.messages[2]["tool_calls"][0]["id"]
    # The losers' simulator calls are recorded all the same, but not counted on the session.
    assert LLMCall.objects.filter(stage="simulator").count() == 3
    assert len(session.llm_call_ids) == 1


def test_an_abandon_goes_through_while_a_step_waits_and_the_step_then_loses(
    transactional_db, shop, script, llm_stub, users
):
    token = user_token(user=users["curator"])
    env_id = token_client(token).post(URL, {"task": shop["tasks"][0].pk}, format="json").json()["id"]
    waiting = threading.Event()
    answer_simulator = script.__call__

    def slow_simulator(request):
        if request.stage == "simulator":
            waiting.set()
            reply = answer_simulator(request)
            reply.delay = 3.0
            return reply
        return answer_simulator(request)

    llm_stub.responder = slow_simulator
    step = {}

    def send():
        response = token_client(token).post(f"{URL}{env_id}/step", {"message": cancel_message("call_a")}, format="json")
        step.update(status=response.status_code, body=response.json())

    thread = threading.Thread(target=lambda: (send(), connection.close()))
    thread.start()
    assert waiting.wait(timeout=30)
    abandoned = token_client(token).post(f"{URL}{env_id}/abandon")
    assert abandoned.status_code == 200 and thread.is_alive()  # no lock held by the waiting step
    thread.join(timeout=60)
    assert step["status"] == 409 and step["body"]["error"] == "concurrent_step"
    session = EnvSession.objects.get(pk=env_id)
    assert session.termination_reason == "abandoned" and [m["role"] for m in session.messages] == ["system", "user"]
    assert LLMCall.objects.filter(stage="simulator").count() == 1  # the losing step's call is recorded


def test_a_create_writes_its_session_while_another_create_holds_the_account(transactional_db, shop, script, users):
    """The account's row lock covers only the count after the write: a create is not queued behind others'
    writes (100 creates at once used to wait on each other's megabytes of world state)."""
    from django.db import transaction

    from simia_web.accounts.models import User
    from tests.conftest import wait_for

    curator = users["curator"]
    held, release, answers = threading.Event(), threading.Event(), []

    def hold_the_account():
        with transaction.atomic():
            User.objects.select_for_update(no_key=True).get(pk=curator.pk)  # as a create counting
            held.set()
            release.wait(60)

    def create():
        answers.append(token_client(user_token(user=curator)).post(URL, {"task": shop["tasks"][0].pk}, format="json"))

    holder = threading.Thread(target=lambda: run_threads(lambda: hold_the_account(), [()]))
    holder.start()
    assert held.wait(30)
    creator = threading.Thread(target=lambda: run_threads(create, [()]))
    creator.start()
    try:
        wait_for(lambda: EnvSession.objects.filter(created_by=curator).exists(), message="the session to be written")
        assert answers == []  # written, and now waiting to be counted
    finally:
        release.set()
        holder.join(60)
        creator.join(60)
    assert [answer.status_code for answer in answers] == [201]


def test_racing_creates_keep_the_live_session_cap_exact(transactional_db, shop, script, users, settings):
    settings.SIMIA_ENV_MAX_LIVE_SESSIONS = 3
    token = user_token(user=users["curator"])
    statuses = []

    def create():
        statuses.append(token_client(token).post(URL, {"task": shop["tasks"][0].pk}, format="json").status_code)

    run_threads(create, [()] * 8)
    assert sorted(statuses) == [201] * 3 + [429] * 5
    assert EnvSession.objects.filter(created_by=users["curator"], done=False).count() == 3
