"""The async client of Simia's RL environments: sessions (episodes) reset, stepped and abandoned over HTTP."""

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable

import httpx

from .http import ApiError, Retry, request_json
from .results import Opening, SessionState, SessionSummary, StepResult

# A policy: given the conversation so far and the tools, the next assistant message (OpenAI chat format).
Policy = Callable[[list[dict], list[dict]], Awaitable[dict]]


class SimiaClient:
    """A connection to a Simia server for one account (a curator's or admin's token).

    `base_url` and `token` default to the SIMIA_URL and SIMIA_TOKEN environment variables. Every call is
    retried on 429 and 503 as `retry` says, honouring the server's Retry-After. Pass `http_client` for
    your own connection limits, proxies or event hooks; the client then leaves closing it to you.
    """

    def __init__(
        self,
        base_url: str | None = None,
        token: str | None = None,
        *,
        timeout: float = 600.0,
        retry: Retry | None = None,
        http_client: httpx.AsyncClient | None = None,
    ):
        base_url = base_url or os.environ.get("SIMIA_URL")
        token = token or os.environ.get("SIMIA_TOKEN")
        if not base_url or not token:
            raise ValueError("give the server's base_url and a token (or set SIMIA_URL and SIMIA_TOKEN)")
        self.base_url = base_url.rstrip("/")
        self.retry = retry or Retry()
        self._headers = {"Authorization": f"Token {token}"}
        self._owns_http = http_client is None
        # Every session of a large batch waits on the server at once: one connection each, up to a bound.
        self._http = http_client or httpx.AsyncClient(
            timeout=timeout, limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)
        )

    async def __aenter__(self) -> "SimiaClient":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def _call(self, method: str, path: str, *, json=None, params=None):
        url = path if path.startswith(("http://", "https://")) else f"{self.base_url}/api/v1/envs/{path}"
        return await request_json(
            self._http, method, url, retry=self.retry, headers=self._headers, json=json, params=params
        )

    async def reset(
        self,
        *,
        task: int | None = None,
        domain: str | None = None,
        seed: int | None = None,
        group: str | None = None,
        max_steps: int | None = None,
        max_errors: int | None = None,
        token_budget: int | None = None,
        max_tool_calls_per_step: int | None = None,
    ) -> "Session":
        """Start an episode on a task, a seeded sample of a domain, or the task of a group."""
        body = {
            "task": task,
            "domain": domain,
            "seed": seed,
            "group": group,
            "max_steps": max_steps,
            "max_errors": max_errors,
            "token_budget": token_budget,
            "max_tool_calls_per_step": max_tool_calls_per_step,
        }
        opening = Opening.from_json(
            await self._call("POST", "", json={key: value for key, value in body.items() if value is not None})
        )
        return Session(self, opening)

    async def reset_group(self, group: str, size: int, **prompt) -> list["Session"]:
        """`size` episodes of one group, all playing the task its first create picks (a GRPO group).
        `prompt` is what `reset` takes besides `group`; a group key must be new for each training step."""
        return list(await asyncio.gather(*(self.reset(group=group, **prompt) for _ in range(size))))

    async def step(self, session_id: str, message: dict) -> StepResult:
        """Send one assistant message (OpenAI chat format) to the session."""
        return StepResult.from_json(await self._call("POST", f"{session_id}/step", json={"message": message}))

    async def abandon(self, session_id: str) -> StepResult:
        """End an unfinished episode now: stored, not judged, no reward."""
        return StepResult.from_json(await self._call("POST", f"{session_id}/abandon"))

    async def state(self, session_id: str) -> SessionState:
        """The session as stored, its reward included once the episode is judged."""
        return SessionState.from_json(await self._call("GET", session_id))

    async def sessions(
        self, *, group: str | None = None, domain: str | None = None, done: bool | None = None
    ) -> AsyncIterator[SessionSummary]:
        """Your sessions (an admin's: everyone's), newest first, following the pages."""
        params = {"group": group, "domain": domain, "done": None if done is None else str(done).lower()}
        page = await self._call("GET", "", params={key: value for key, value in params.items() if value is not None})
        while True:
            for item in page["results"]:
                yield SessionSummary.from_json(item)
            if not page.get("next"):
                return
            page = await self._call("GET", page["next"])


class Session:
    """An open episode: its opening, the conversation so far (system prompt, observations and the agent's
    messages, ready to send to the policy) and the calls that advance it."""

    def __init__(self, client: SimiaClient, opening: Opening):
        self.client = client
        self.opening = opening
        self.messages: list[dict] = [{"role": "system", "content": opening.system}, *opening.observation]
        self.result: StepResult | None = None  # the last step's answer

    @property
    def id(self) -> str:
        return self.opening.id

    @property
    def tools(self) -> list[dict]:
        return self.opening.tools

    @property
    def done(self) -> bool:
        return self.result is not None and self.result.done

    @property
    def reward(self) -> float | None:
        return self.result.reward if self.result is not None else None

    async def step(self, message: dict) -> StepResult:
        self.result = await self.client.step(self.id, message)
        self.messages += [message, *self.result.observation]
        return self.result

    async def abandon(self) -> StepResult:
        self.result = await self.client.abandon(self.id)
        return self.result

    async def state(self) -> SessionState:
        return await self.client.state(self.id)

    async def play(self, policy: Policy) -> StepResult:
        """Step with the policy's messages until the episode ends. If the policy or a step fails, the
        session is abandoned first (it is stored, unjudged) and the error raised."""
        try:
            while not self.done:
                await self.step(await policy(self.messages, self.tools))
        except BaseException:
            with contextlib.suppress(ApiError, httpx.HTTPError):  # it ended meanwhile, or the server is gone
                await self.abandon()
            raise
        return self.result
