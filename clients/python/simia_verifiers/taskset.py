"""The tasks: Simia resets, and the reward read from the session the episode played."""

import json
import os
from collections.abc import Iterator
from typing import Any

import verifiers.v1 as vf
from pydantic import Field

from simia_client import SimiaClient

TASKSET_ID = "simia-verifiers"


class SimiaTaskData(vf.TaskData):
    url: str
    """Simia's base URL."""
    token_var: str
    """The environment variable holding the account's token (never written to a trace)."""
    reset: dict[str, Any]
    """What `POST /api/v1/envs/` is sent: {"task": 12}, or {"domain": "retail", "seed": 3}, and limits."""
    session: str | None = None
    """The Simia session the episode plays, once it is open."""
    tools: list[dict] = Field(default_factory=list)
    """The session's tools (OpenAI function format), offered to the policy on every turn."""

    def client(self) -> SimiaClient:
        token = os.environ.get(self.token_var)
        if not token:
            raise ValueError(f"set {self.token_var} to the token of a Simia curator or admin")
        return SimiaClient(self.url, token)


class SimiaTask(vf.Task[SimiaTaskData]):
    @property
    def key(self) -> str:
        return json.dumps(self.data.reset, sort_keys=True)

    @vf.reward
    async def simia_reward(self) -> float:
        """Simia's judged reward of the session: the judge's mean score over its criteria (0..1)."""
        async with self.data.client() as simia:
            state = await simia.state(self.data.session)
        if state.reward is None:
            raise ValueError(
                f"Simia session {state.id} ended ({state.termination_reason}) without a judged reward"
            )
        return state.reward


class SimiaTasksetConfig(vf.TasksetConfig):
    url: str = "http://127.0.0.1:8000"
    """Simia's base URL."""
    token_var: str = "SIMIA_TOKEN"
    """The environment variable holding a curator's or admin's token."""
    tasks: list[int] = Field(default_factory=list)
    """Simia task ids to play."""
    domain: str | None = None
    """A domain whose valid tasks are sampled, one seed per task (0, 1, ...)."""
    seeds: int = Field(16, ge=1)
    """How many seeded samples of `domain`."""
    limits: dict[str, int] = Field(default_factory=dict)
    """Session limits sent with every reset: max_steps, max_errors, token_budget, max_tool_calls_per_step."""


class SimiaTaskset(vf.Taskset[SimiaTask, SimiaTasksetConfig]):
    def load(self) -> Iterator[SimiaTask]:
        config = self.config
        resets = [{"task": task} for task in config.tasks]
        if config.domain:
            resets += [{"domain": config.domain, "seed": seed} for seed in range(config.seeds)]
        if not resets:
            raise ValueError("nothing to play: give Simia task ids (--env.taskset.tasks) or --env.taskset.domain")
        for reset in resets:
            data = SimiaTaskData(
                name=json.dumps(reset), url=config.url, token_var=config.token_var, reset={**reset, **config.limits}
            )
            yield SimiaTask(data, config.task)
