"""What the environment answers, typed. Fields the server adds later are ignored, not an error."""

from dataclasses import dataclass, fields
from typing import Any, Self


class _FromJson:
    @classmethod
    def from_json(cls, data: dict) -> Self:
        names = {field.name for field in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in names})


@dataclass(frozen=True)
class Opening(_FromJson):
    """The reset answer: the session's id, the first observation and what the agent may call."""

    id: str
    observation: list[dict]
    tools: list[dict]
    system: str
    task: int
    domain: str
    group: str | None
    limits: dict[str, int]


@dataclass(frozen=True)
class StepResult(_FromJson):
    """One step's answer: messages to append, and once `done` the reward (None when unjudged or abandoned)."""

    observation: list[dict]
    done: bool
    reward: float | None
    termination_reason: str | None
    info: dict[str, Any]


@dataclass(frozen=True)
class SessionState(_FromJson):
    """A session as stored: its counters, and its reward once judged."""

    id: str
    task: int
    domain: str
    group: str | None
    done: bool
    reward: float | None
    reward_breakdown: dict[str, float]
    termination_reason: str | None
    steps: int
    errors: int
    tokens_used: int
    messages: int
    limits: dict[str, int]
    trajectory: int | None
    created_at: str
    finished_at: str | None


@dataclass(frozen=True)
class SessionSummary(_FromJson):
    """A session as listed."""

    id: str
    task: int
    domain: str
    group: str | None
    done: bool
    reward: float | None
    termination_reason: str | None
    steps: int
    created_at: str
