"""The policy being trained, served by an OpenAI-compatible chat-completions endpoint (vLLM, SGLang, …)."""

from dataclasses import dataclass

import httpx

from .http import Retry, request_json


@dataclass(frozen=True)
class Completion:
    """One policy turn: the assistant message and, when asked for (vLLM's `return_token_ids`), the token ids
    of the rendered prompt and of the completion with each completion token's log-probability."""

    message: dict
    prompt_token_ids: list[int] | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None


class ChatPolicy:
    """Calls `{base_url}/chat/completions` with the conversation and the session's tools.

    An instance is a `Policy` for `Session.play`: awaiting it with (messages, tools) gives the next assistant
    message. `sampling` is sent with every request (temperature, max_tokens, …).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        sampling: dict | None = None,
        timeout: float = 600.0,
        retry: Retry | None = None,
        http_client: httpx.AsyncClient | None = None,
    ):
        self.url = f"{base_url.rstrip('/')}/chat/completions"
        self.model = model
        self.sampling = dict(sampling or {})
        self.retry = retry or Retry()
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(
            timeout=timeout, limits=httpx.Limits(max_connections=256, max_keepalive_connections=64)
        )

    async def __aenter__(self) -> "ChatPolicy":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    async def __call__(self, messages: list[dict], tools: list[dict]) -> dict:
        return (await self.complete(messages, tools)).message

    async def complete(self, messages: list[dict], tools: list[dict], *, token_ids: bool = False) -> Completion:
        body = {"model": self.model, "messages": messages, **self.sampling}
        if tools:
            # Some servers (llama.cpp's) only offer the tools when a tool choice is sent.
            body |= {"tools": tools, "tool_choice": "auto"}
        if token_ids:
            body |= {"logprobs": True, "return_token_ids": True}
        answer = await request_json(self._http, "POST", self.url, retry=self.retry, headers=self._headers, json=body)
        choice = answer["choices"][0]
        # A tool-call turn goes back into the conversation: some servers refuse `content: null` (llama.cpp's).
        message = {**choice["message"], "content": choice["message"].get("content") or ""}
        completion = Completion(message)
        if not token_ids:
            return completion
        if answer.get("prompt_token_ids") is None or choice.get("token_ids") is None:
            raise ValueError(
                f"{self.url} returned no token ids: serve the policy with vLLM (or another server that honours "
                "`return_token_ids`) to train on its completions"
            )
        logprobs = [entry["logprob"] for entry in (choice.get("logprobs") or {}).get("content") or []]
        if len(logprobs) != len(choice["token_ids"]):
            raise ValueError(f"{self.url} returned {len(logprobs)} logprobs for {len(choice['token_ids'])} tokens")
        return Completion(message, answer["prompt_token_ids"], choice["token_ids"], logprobs)
