"""Simia's RL environments as a `verifiers` environment (`vf-eval simia-verifiers ...`).

verifiers loads an environment by its taskset id: it imports this package and takes the Taskset, Env and
Harness subclasses it exports. Each task is a Simia reset (a task id, or a seeded sample of a domain); an
episode opens a Simia session, the policy answers turn by turn, and Simia's simulator plays the tools and the
customer. The reward is Simia's judged reward of the session.
"""

from typing import Any

import verifiers.v1 as vf

from .env import SimiaEnv, SimiaEnvConfig
from .harness import SimiaHarness
from .taskset import TASKSET_ID, SimiaTask, SimiaTaskData, SimiaTaskset, SimiaTasksetConfig


def load_environment(**taskset: Any) -> SimiaEnv:
    """The environment as verifiers builds it from a config, e.g.
    `load_environment(url="http://simia:8000", domain="retail", seeds=8)` (fields of SimiaTasksetConfig)."""
    return vf.load_environment(vf.resolve_env_config({"taskset": {**taskset, "id": TASKSET_ID}}))


__all__ = [
    "SimiaEnv",
    "SimiaEnvConfig",
    "SimiaHarness",
    "SimiaTask",
    "SimiaTaskData",
    "SimiaTaskset",
    "SimiaTasksetConfig",
    "load_environment",
]
