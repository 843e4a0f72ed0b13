"""The client's session API against a live server: episodes to their judged rewards, groups, abandon, errors,
and the retries a busy server asks for."""

import asyncio

import httpx
import pytest
from django.db import connection
from rest_framework.throttling import UserRateThrottle
from simia_client import ApiError, ChatPolicy, Retry, SimiaClient, SyncSimiaClient, advantages

from simia_web.environments.models import EnvSession

from .conftest import in_thread

# Sessions step concurrently: the in-memory SQLite test database locks whole tables between threads.
pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers need PostgreSQL here")


def play(coroutine_function, *args):
    return in_thread(asyncio.run, coroutine_function(*args))


def test_an_episode_plays_to_the_judged_reward_simia_stored(simia, llm_stub):
    async def episode():
        async with SimiaClient(simia["url"], simia["token"]) as env, ChatPolicy(llm_stub.url, "policy") as policy:
            session = await env.reset(domain="shop", seed=1, max_steps=5)
            result = await session.play(policy)
            return session, result, await session.state()

    session, result, state = play(episode)
    assert (result.done, result.reward, result.termination_reason) == (True, 0.9, "user_done")
    assert [m["role"] for m in session.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert session.opening.limits["max_steps"] == 5 and session.tools[0]["type"] == "function"
    stored = EnvSession.objects.get(pk=session.id)
    assert (state.reward, state.steps, state.trajectory) == (stored.reward, 2, stored.trajectory_id)
    assert state.reward_breakdown == stored.reward_breakdown and stored.reward == pytest.approx(0.9)


def test_a_group_plays_one_task_and_is_listed_by_its_key(simia, llm_stub):
    async def group():
        async with SimiaClient(simia["url"], simia["token"]) as env, ChatPolicy(llm_stub.url, "policy") as policy:
            sessions = await env.reset_group("step-0-prompt-0", 3, domain="shop")
            results = await asyncio.gather(*(session.play(policy) for session in sessions))
            listed = [summary async for summary in env.sessions(group="step-0-prompt-0", done=True)]
            return sessions, results, listed

    sessions, results, listed = play(group)
    assert len({session.opening.task for session in sessions}) == 1
    assert {summary.id for summary in listed} == {session.id for session in sessions}
    rewards = [result.reward for result in results]
    assert rewards == [summary.reward for summary in listed] == [0.9] * 3
    assert advantages(rewards) == [0.0] * 3
    assert advantages([1.0, 0.0, None]) == [1.0, -1.0, 0.0]


def test_abandon_ends_unjudged_and_error_answers_are_raised_with_their_code(simia, shop):
    async def abandon_then_misuse():
        async with SimiaClient(simia["url"], simia["token"]) as env:
            session = await env.reset(task=shop["tasks"][0].pk)
            abandoned = await session.abandon()
            errors = []
            for call in (session.step({"content": "hello"}), env.state("00000000-0000-0000-0000-000000000000")):
                with pytest.raises(ApiError) as raised:
                    await call
                errors.append((raised.value.status, raised.value.code))
            return abandoned, errors

    abandoned, errors = play(abandon_then_misuse)
    assert (abandoned.done, abandoned.reward, abandoned.termination_reason) == (True, None, "abandoned")
    assert errors == [(409, "episode_finished"), (404, "not_found")]


def test_a_throttled_call_waits_out_retry_after_and_goes_through(simia, shop, monkeypatch):
    monkeypatch.setitem(UserRateThrottle.THROTTLE_RATES, "user", "3/second")
    answered = []

    async def record(response: httpx.Response):
        answered.append((response.status_code, response.headers.get("retry-after")))

    async def burst():
        async with (
            httpx.AsyncClient(event_hooks={"response": [record]}) as http,
            SimiaClient(simia["url"], simia["token"], http_client=http) as env,
        ):
            session = await env.reset(task=shop["tasks"][0].pk)
            return [await session.state() for _ in range(6)]

    states = play(burst)
    assert len(states) == 6 and all(state.steps == 0 for state in states)
    throttled = [retry_after for status, retry_after in answered if status == 429]
    assert throttled and all(int(retry_after) >= 1 for retry_after in throttled)
    assert [status for status, _ in answered].count(200) == 6


def test_a_session_limit_is_waited_out_until_another_session_ends(simia, shop, settings):
    settings.SIMIA_ENV_MAX_LIVE_SESSIONS = 1

    async def two_sessions():
        refused = asyncio.Event()

        async def record(response: httpx.Response):
            if response.status_code == 429:
                refused.set()

        async with (
            httpx.AsyncClient(event_hooks={"response": [record]}) as http,
            SimiaClient(simia["url"], simia["token"], http_client=http, retry=Retry(attempts=50, max_wait=0.2)) as env,
        ):
            first = await env.reset(task=shop["tasks"][0].pk)
            second = asyncio.create_task(env.reset(task=shop["tasks"][1].pk))
            await refused.wait()  # the second waits for a free slot...
            await first.abandon()  # ...which the first gives back
            return await second

    second = play(two_sessions)
    assert EnvSession.objects.get(pk=second.id).task_id == shop["tasks"][1].pk


def test_the_blocking_client_steps_an_episode(simia, llm_stub):
    def episode():
        with SyncSimiaClient(simia["url"], simia["token"]) as env:
            session = env.reset(domain="shop", seed=2)
            call = {"id": "c1", "type": "function", "function": {"name": "cancel_order", "arguments": "{}"}}
            first = session.step({"role": "assistant", "content": "", "tool_calls": [call]})
            last = session.step({"role": "assistant", "content": "Done."})
            return session, first, last, env.sessions(done=True)

    session, first, last, listed = in_thread(episode)
    assert first.observation[0]["role"] == "tool" and not first.done
    assert (last.done, last.reward) == (True, 0.9) and session.reward == 0.9
    assert [summary.id for summary in listed] == [session.id]
