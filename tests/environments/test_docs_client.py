"""The client in the README runs a whole episode against a live server."""

import re

import pytest

from simia_web.accounts.services import user_token
from simia_web.curation.models import Trajectory
from tests.conftest import ROOT
from tests.support.scripts import agent_reply

DOC = ROOT / "README.md"


def test_documented_client_runs_one_episode(live_server, shop, script, llm_stub, users, monkeypatch, capsys):
    code = re.search(r"## RL environments.*?```python\n(.*?)```", DOC.read_text(), re.S).group(1)
    # The stub doubles as the policy server: requests without a stage header are the agent's.
    script.agent = agent_reply
    monkeypatch.setenv("SIMIA_URL", live_server.url)
    monkeypatch.setenv("SIMIA_TOKEN", user_token(user=users["curator"]))
    monkeypatch.setenv("POLICY_URL", llm_stub.url)
    monkeypatch.setenv("SIMIA_DOMAIN", "shop")
    exec(compile(code, str(DOC), "exec"), {})
    assert capsys.readouterr().out.startswith("user_done 0.9")
    trajectory = Trajectory.objects.get(kind="rl")
    assert [m["role"] for m in trajectory.messages] == ["system", "user", "assistant", "tool", "assistant"]
    assert trajectory.reward == pytest.approx(0.9)
