"""Client of Simia Web's RL environments: async sessions, a blocking wrapper, GRPO helpers for trainers."""

from .client import Policy, Session, SimiaClient
from .grpo import EpisodeTokens, TrlRollout, advantages, judged_reward
from .http import ApiError, Retry
from .policy import ChatPolicy, Completion
from .results import Opening, SessionState, SessionSummary, StepResult
from .sync import SyncSession, SyncSimiaClient

__all__ = [
    "ApiError",
    "ChatPolicy",
    "Completion",
    "EpisodeTokens",
    "Opening",
    "Policy",
    "Retry",
    "Session",
    "SessionState",
    "SessionSummary",
    "SimiaClient",
    "StepResult",
    "SyncSession",
    "SyncSimiaClient",
    "TrlRollout",
    "advantages",
    "judged_reward",
]
