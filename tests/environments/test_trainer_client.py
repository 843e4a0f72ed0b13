"""The trainer's client in docs/rl-environments.md runs a batch of groups against a live server."""

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection

from simia_web.accounts.services import user_token
from simia_web.environments.models import EnvGroup, EnvSession
from tests.conftest import ROOT
from tests.support.scripts import agent_reply

DOC = ROOT / "docs" / "rl-environments.md"

# Concurrent sessions: the in-memory SQLite test database locks whole tables between threads (the file
# database of the embedded default waits instead, see test_sqlite_writers).
pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers need PostgreSQL here")


def test_documented_trainer_client_runs_groups_to_their_rewards(
    live_server, shop, script, llm_stub, users, monkeypatch, capsys
):
    code = re.search(r"## A trainer's client.*?```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    script.agent = agent_reply  # the stub doubles as the policy server (requests without a stage)
    monkeypatch.setenv("SIMIA_URL", live_server.url)
    monkeypatch.setenv("SIMIA_TOKEN", user_token(user=users["curator"]))
    monkeypatch.setenv("POLICY_URL", llm_stub.url)
    monkeypatch.setenv("SIMIA_DOMAIN", "shop")
    monkeypatch.setenv("GROUP_SIZE", "3")
    monkeypatch.setenv("BATCH", "2")
    # A thread of its own, as a trainer's script runs: asyncio.run needs a thread with no running event loop, and
    # Playwright's sync API (the browser tests) keeps one running in the main thread.
    with ThreadPoolExecutor(1) as runner:
        runner.submit(exec, compile(code, str(DOC), "exec"), {"__name__": "__main__"}).result()
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines == ["[0.9, 0.9, 0.9] [0.0, 0.0, 0.0]"] * 2
    assert EnvGroup.objects.count() == 2
    for group in EnvGroup.objects.all():
        sessions = EnvSession.objects.filter(group=group)
        assert sessions.count() == 3 and {s.task_id for s in sessions} == {group.task_id}
        assert all(s.done and s.termination_reason == "user_done" and s.trajectory_id for s in sessions)
