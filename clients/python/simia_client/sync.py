"""The same calls without asyncio, for scripts and notebooks without an event loop running."""

import asyncio

from .client import Session, SimiaClient
from .results import SessionState, SessionSummary, StepResult


class SyncSimiaClient:
    """`SimiaClient` run on an event loop of its own: each call blocks until its answer (and its retries)."""

    def __init__(self, *args, **kwargs):
        self._runner = asyncio.Runner()
        self._client = SimiaClient(*args, **kwargs)

    def __enter__(self) -> "SyncSimiaClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._runner.run(self._client.aclose())
        self._runner.close()

    def reset(self, **prompt) -> "SyncSession":
        return SyncSession(self._runner, self._runner.run(self._client.reset(**prompt)))

    def reset_group(self, group: str, size: int, **prompt) -> list["SyncSession"]:
        sessions = self._runner.run(self._client.reset_group(group, size, **prompt))
        return [SyncSession(self._runner, session) for session in sessions]

    def state(self, session_id: str) -> SessionState:
        return self._runner.run(self._client.state(session_id))

    def sessions(self, **filters) -> list[SessionSummary]:
        async def listed():
            return [summary async for summary in self._client.sessions(**filters)]

        return self._runner.run(listed())


class SyncSession:
    """A `Session` whose calls block; its opening, conversation and last result are the async session's."""

    def __init__(self, runner: asyncio.Runner, session: Session):
        self._runner = runner
        self.session = session

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def messages(self) -> list[dict]:
        return self.session.messages

    @property
    def tools(self) -> list[dict]:
        return self.session.tools

    @property
    def done(self) -> bool:
        return self.session.done

    @property
    def reward(self) -> float | None:
        return self.session.reward

    def step(self, message: dict) -> StepResult:
        return self._runner.run(self.session.step(message))

    def abandon(self) -> StepResult:
        return self._runner.run(self.session.abandon())

    def state(self) -> SessionState:
        return self._runner.run(self.session.state())
