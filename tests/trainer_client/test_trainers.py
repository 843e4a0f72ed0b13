"""verifiers and TRL run Simia episodes end to end (nothing is trained): a `vf-eval` of the Simia environment and
a call of the TRL rollout function with a GRPOTrainer, in the trainer venv, against the live server, with the
scripted stub as the simulator, the judge and the policy. The rewards they report are the sessions' rewards."""

import json
import os
import subprocess
from pathlib import Path

import pytest
from django.db import connection

from simia_web.environments.models import EnvSession
from tests.conftest import ROOT

from .vllm_policy import LOGPROB, render_prompt, turn_text

TRAINER_BIN = ROOT / ".venv-trainer" / "bin"

pytestmark = [
    # Sessions step concurrently: the in-memory SQLite test database locks whole tables between threads.
    pytest.mark.skipif(connection.vendor != "postgresql", reason="concurrent writers need PostgreSQL here"),
    pytest.mark.skipif(not TRAINER_BIN.exists(), reason="the trainer venv is missing: run `make trainer-venv`"),
]


def trainer_run(argv: list[str], simia: dict, cwd: Path) -> str:
    """Run a trainer-side command in the trainer venv; its output, or its output in the failure."""
    env = {**os.environ, "SIMIA_TOKEN": simia["token"], "POLICY_API_KEY": "unused", "HF_HUB_OFFLINE": "1"}
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{argv[0]} exited {done.returncode}:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout


def vf_eval(simia: dict, llm_stub, tmp_path: Path, *options: str) -> list[dict]:
    """`vf-eval` of the Simia environment on the shop domain; the traces it wrote."""
    trainer_run(
        [
            str(TRAINER_BIN / "vf-eval"),
            "simia-verifiers",
            "--env.taskset.url", simia["url"],
            "--env.taskset.domain", "shop",
            "--model", "policy",
            "--client.base-url", llm_stub.url,
            "--client.api-key-var", "POLICY_API_KEY",
            "--no-push",
            "--no-rich",
            "--output-dir", str(tmp_path),
            "--run.name", "simia",
            *options,
        ],
        simia,
        tmp_path,
    )  # fmt: skip
    episodes = (tmp_path / "simia" / "traces.jsonl").read_text().splitlines()
    return [trace for line in episodes for trace in json.loads(line)["traces"]]


def test_a_verifiers_eval_reports_simia_session_rewards(simia, llm_stub, tmp_path):
    traces = vf_eval(simia, llm_stub, tmp_path, "--env.taskset.seeds", "2", "--num-rollouts", "2")
    assert len(traces) == 4  # 2 tasks x 2 rollouts
    sessions = {str(session.pk): session for session in EnvSession.objects.all()}
    assert set(sessions) == {trace["task"]["data"]["session"] for trace in traces}
    for trace in traces:
        session = sessions[trace["task"]["data"]["session"]]
        assert trace["rewards"]["simia_reward"]["score"] == pytest.approx(session.reward) == 0.9
        assert session.done and session.termination_reason == trace["stop_condition"] == "user_done"
    # The rollouts of a task form one Simia group, which plays one task.
    groups = {}
    for session in sessions.values():
        groups.setdefault(session.group_id, set()).add(session.task_id)
    assert len(groups) == 2 and all(len(tasks) == 1 for tasks in groups.values())


def test_an_episode_cut_by_a_verifiers_limit_is_abandoned_and_not_scored(simia, llm_stub, tmp_path):
    [trace] = vf_eval(simia, llm_stub, tmp_path, "--env.taskset.seeds", "1", "--env.agent.max-turns", "1")
    session = EnvSession.objects.get()
    assert (session.done, session.termination_reason, session.reward) == (True, "abandoned", None)
    assert trace["task"]["data"]["session"] == str(session.pk) and not trace["ok"]
    assert "without a judged reward" in trace["errors"][-1]["message"]


def test_the_trl_rollout_function_returns_episodes_and_simia_session_rewards(simia, llm_stub, tmp_path):
    printed = trainer_run(
        [str(TRAINER_BIN / "python"), str(Path(__file__).with_name("trl_rollout.py")), simia["url"], llm_stub.url],
        simia,
        tmp_path,
    )
    result = json.loads(printed.strip().splitlines()[-1])
    output, prompts = result["output"], result["prompts"]
    # The trainer's sampler repeats each prompt num_generations times: one episode each, one group per prompt.
    assert len(prompts) == 4 and len(set(prompts)) == 2
    sessions = [EnvSession.objects.get(pk=session_id) for session_id in output["simia_session"]]
    assert result["rewards"] == output["simia_reward"] == [session.reward for session in sessions] == [0.9] * 4
    assert output["simia_termination"] == ["user_done"] * 4
    for prompt in set(prompts):
        group = [session for session, p in zip(sessions, prompts, strict=True) if p == prompt]
        assert len(group) == 2 and len({(s.group_id, s.task_id) for s in group}) == 1
    # Each sample is the episode's tokens: the first prompt, then the policy's turns (mask 1, with their
    # log-probabilities) and the environment's answer between them (mask 0).
    for i, session in enumerate(sessions):
        completion, mask, logprobs = output["completion_ids"][i], output["env_mask"][i], output["logprobs"][i]
        assert len(completion) == len(mask) == len(logprobs)
        assert [lp for lp, m in zip(logprobs, mask, strict=True) if m] == [LOGPROB] * sum(mask)
        assert not any(lp for lp, m in zip(logprobs, mask, strict=True) if not m)
        spans = [bytes(completion[start:end]).decode() for start, end in runs(mask)]
        system, opening, call, tool, answer = session.messages
        assert bytes(output["prompt_ids"][i]).decode() == render_prompt([system, opening], session.tools)
        assert spans == [turn_text(call), f"<|tool|>{turn_text(tool)}<|assistant|>", turn_text(answer)]


def runs(mask: list[int]) -> list[tuple[int, int]]:
    """The (start, end) of each run of equal values."""
    bounds = [0] + [i for i in range(1, len(mask)) if mask[i] != mask[i - 1]] + [len(mask)]
    return list(zip(bounds, bounds[1:], strict=False))
