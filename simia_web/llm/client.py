"""The one way the app talks to an LLM: the `openai` client against any OpenAI-compatible endpoint.

Every HTTP attempt becomes an LLMCall row. Transient failures (429, 5xx, timeouts, connection
errors, malformed responses) back off and retry; in auto mode, endpoints that reject `json_schema`
or native tools fall back to a weaker mode, remembered per profile; structured answers are
validated against their JSON Schema with one repair retry that quotes the error.
"""

import json
import logging
import os
import random
import re
import threading
import time
import uuid
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx2
import openai
import orjson
from django.conf import settings
from django.db import connection

from simia_web.core.json_input import json_parse
from simia_web.core.jsonutil import content_hash
from simia_web.core.schemas import first_error

from .limits import endpoint_limiter
from .models import EndpointProfile, LLMCall, StructuredMode, ToolMode
from .services import llm_call_ids, llm_call_mark_invalid, llm_call_record, llm_slot_rank
from .transport import LimitedTransport, exchange_ms
from .validation import api_key_read

logger = logging.getLogger(__name__)


class LLMError(Exception):
    """A call that could not produce a usable answer; `kind` is a short machine-readable reason."""

    def __init__(self, kind: str, detail: str):
        self.kind = kind
        self.detail = detail
        super().__init__(f"{kind}: {detail}")


@dataclass
class LLMReply:
    data: Any  # parsed JSON for structured calls, the assistant message for chat calls
    calls: list[LLMCall] = field(default_factory=list)

    @property
    def call_ids(self) -> list[int]:
        return llm_call_ids(self.calls)

    @property
    def last_call(self) -> LLMCall | None:
        return self.calls[-1] if self.calls else None


_thread_clients = threading.local()  # .clients: {client key: (openai.OpenAI, chat completions URL)}
_downgrades: dict[tuple, str] = {}  # (profile key, "structured"|"tools") -> weaker mode learned at run time

_STRUCTURED_FALLBACK = {
    StructuredMode.JSON_SCHEMA: StructuredMode.JSON_OBJECT,
    StructuredMode.JSON_OBJECT: StructuredMode.PROMPT,
}
# A 400 answer that names an option (response_format, tools) and says the server does not take it, as
# "... is not supported", "does not support tools" or "requires --enable-auto-tool-choice" do. An answer
# that only names the option, such as an invalid schema for one function, is a bad request.
_OPTION = r"\b(?:response_format|json_schema|json_object|structured|tools?|tool_choice|functions?)\b"
_REFUSAL = r"\b(?:not supported|unsupported|does not support|requires|unrecogni[sz]ed|not allowed)\b"
_UNSUPPORTED_HINTS = re.compile(rf"{_OPTION}.{{0,80}}?{_REFUSAL}|{_REFUSAL}.{{0,80}}?{_OPTION}", re.I | re.S)
_CODE_FENCE = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S | re.I)
_THINKING = re.compile(r"<think>.*?</think>", re.S | re.I)  # reasoning models served by vLLM/Ollama
_RETRY_AFTER_CAP = 30.0
# The SDK's telemetry headers (its platform, and retry count and timeout, which are ours to keep):
# a dozen more headers to build, validate and send on every call, which no endpoint needs.
_DROPPED_HEADERS = {
    name: openai.Omit()
    for name in (
        "X-Stainless-Lang",
        "X-Stainless-Package-Version",
        "X-Stainless-OS",
        "X-Stainless-Arch",
        "X-Stainless-Runtime",
        "X-Stainless-Runtime-Version",
        "X-Stainless-Async",
    )
}
_PER_REQUEST_DROPPED_HEADERS = {"X-Stainless-Retry-Count": openai.Omit(), "X-Stainless-Read-Timeout": openai.Omit()}


def _openai_client(profile: EndpointProfile) -> tuple[openai.OpenAI, str]:
    """This thread's client for the profile's endpoint, and the endpoint's chat completions URL.

    The profile's limits are shared by all threads (and, through Redis, by every worker). The URL is
    absolute, so that the SDK does not join it to its base URL again on every request (a tenth of the
    SDK's own CPU per request).

    One client per worker thread, each with its own connection: a shared connection pool locks and
    polls every idle connection on each request, and on a busy worker each of those steps waits for
    the GIL while holding the pool lock and a slot, which cost a sixth of the endpoint's capacity.
    """
    api_key = api_key_read(profile.api_key_env) or "not-needed"
    key = (profile.pk, profile.max_concurrency, profile.base_url, api_key, profile.timeout_seconds)
    clients = _thread_clients.__dict__.setdefault("clients", {})
    if key not in clients:
        transport = LimitedTransport(endpoint_limiter(profile), llm_slot_rank)
        # Retries are ours, so that every attempt is logged and counted.
        client = openai.OpenAI(
            base_url=profile.base_url or None,
            api_key=api_key,
            timeout=profile.timeout_seconds,
            max_retries=0,
            default_headers=_DROPPED_HEADERS,
            http_client=openai.DefaultHttpxClient(transport=transport),
        )
        clients[key] = client, str(client.base_url.join("chat/completions"))
    return clients[key]


def _redact_key(text: str, profile: EndpointProfile) -> str:
    api_key = os.environ.get(profile.api_key_env, "")
    return text.replace(api_key, "[redacted]") if len(api_key) >= 8 else text


def _cost(profile: EndpointProfile, tokens_in: int, tokens_out: int) -> Decimal | None:
    if profile.price_input_per_mtok is None and profile.price_output_per_mtok is None:
        return None
    price_in = profile.price_input_per_mtok or Decimal(0)
    price_out = profile.price_output_per_mtok or Decimal(0)
    return (price_in * tokens_in + price_out * tokens_out) / Decimal(1_000_000)


def _retry_after(exc: Exception) -> float | None:
    """The server's requested wait (Retry-After seconds, or retry-after-ms), capped."""
    response = getattr(exc, "response", None)
    if response is None:
        return None
    for header, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return min(float(response.headers[header]) * scale, _RETRY_AFTER_CAP)
        except (KeyError, ValueError):  # absent, or an HTTP date: use our own backoff
            continue
    return None


def parse_json_answer(text: str | None) -> Any:
    """Parse a model's JSON answer, tolerating reasoning blocks, a Markdown code fence or prose around it."""
    text = _THINKING.sub("", text or "").strip()
    if not text:
        raise ValueError("the answer is empty")
    fenced = _CODE_FENCE.search(text)
    if fenced:
        text = fenced.group(1)
    try:
        return json_parse(text, where="the answer")
    except ValueError:
        start, end = text.find("{"), text.rfind("}")
        if 0 <= start < end and (start > 0 or end < len(text) - 1):
            return json_parse(text[start : end + 1], where="the answer")
        raise


# Until an endpoint's context window is known, prompts are sized for an 8k-token one at a conservative
# 2.3 characters per token (JSON with ids tokenizes densely: SmolLM2 reads τ² retail prompts at ~2.5, a digit
# a token), with room for the chat template.
DEFAULT_CONTEXT_TOKENS = 8192
TEMPLATE_TOKENS = 256
CHARS_PER_TOKEN = 2.3


class LLMClient:
    def __init__(self, profile: EndpointProfile, *, stage: str, job_id: int | None = None):
        self.profile = profile
        self.stage = stage
        self.job_id = job_id

    def prompt_chars_available(self) -> int:
        """Characters of prompt that fit the context window beside the answer's max_tokens."""
        tokens = DEFAULT_CONTEXT_TOKENS - min(self.profile.max_tokens, DEFAULT_CONTEXT_TOKENS // 2) - TEMPLATE_TOKENS
        return int(tokens * CHARS_PER_TOKEN)

    # -- public calls -------------------------------------------------------------------------

    def structured(
        self, *, messages: list[dict], schema: dict, schema_name: str, prompt_version: str = "", cache_salt: str = ""
    ) -> LLMReply:
        """Ask for a JSON answer matching `schema`; returns it parsed and validated."""
        reply = LLMReply(data=None)
        conversation = list(messages)
        for repair in (False, True):
            content, call = self._send_structured(conversation, schema, schema_name, prompt_version, cache_salt, reply)
            try:
                data = parse_json_answer(content)
                problem = first_error(schema, data)
            except ValueError as exc:
                data, problem = None, f"not valid JSON ({exc})"
            if problem is None:
                reply.data = data
                return reply
            self._mark_invalid(call, "invalid_json" if data is None else "schema_invalid", problem)
            if repair:
                raise LLMError("invalid_output", f"answer still invalid after a repair request: {problem}")
            conversation = conversation + [
                {"role": "assistant", "content": content or ""},
                {
                    "role": "user",
                    "content": f"Your answer was invalid: {problem}. Reply again with only the corrected JSON "
                    "object matching the schema, and nothing else.",
                },
            ]
        raise AssertionError("unreachable")

    def chat(
        self, *, messages: list[dict], tools: list[dict] | None = None, prompt_version: str = "", cache_salt: str = ""
    ) -> LLMReply:
        """One assistant turn with native tool calling (or tool calls as JSON where unsupported)."""
        reply = LLMReply(data=None)
        if not tools:
            reply.data, _call = self._complete(messages, {}, ToolMode.NATIVE, prompt_version, cache_salt, reply)
            return reply
        mode = self._mode("tools", self.profile.tool_mode, ToolMode.NATIVE)
        while True:
            try:
                if mode == ToolMode.PROMPT:
                    reply.data = self._chat_prompt_tools(messages, tools, prompt_version, cache_salt, reply)
                else:
                    reply.data, _call = self._complete(
                        messages, {"tools": tools}, mode, prompt_version, cache_salt, reply
                    )
                return reply
            except _Unsupported:
                mode = self._fall_back("tools", self.profile.tool_mode, mode, ToolMode.PROMPT)

    # -- modes ---------------------------------------------------------------------------------

    def _mode(self, what: str, configured: str, auto_start: str) -> str:
        """A forced mode is used as is; auto starts strong and keeps what it learned for this endpoint."""
        if configured != "auto":
            return configured
        return _downgrades.get(self._learned_key(what), auto_start)

    def _fall_back(self, what: str, configured: str, current: str, weaker: str | None) -> str:
        if configured != "auto" or weaker is None:
            raise LLMError("unsupported", f"the endpoint rejected {what} mode {current}")
        _downgrades[self._learned_key(what)] = weaker
        logger.warning("profile %s: falling back to %s mode for %s", self.profile.name, weaker, what)
        return weaker

    def _learned_key(self, what: str) -> tuple:
        return (self.profile.pk, self.profile.base_url, self.profile.model, what)

    def _send_structured(self, conversation, schema, schema_name, prompt_version, cache_salt, reply):
        mode = self._mode("structured", self.profile.structured_mode, StructuredMode.JSON_SCHEMA)
        while True:
            kwargs: dict[str, Any] = {}
            messages = conversation
            if mode == StructuredMode.JSON_SCHEMA:
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": _schema_name(schema_name), "schema": schema, "strict": False},
                }
            else:
                if mode == StructuredMode.JSON_OBJECT:
                    kwargs["response_format"] = {"type": "json_object"}
                messages = _with_system(conversation, _schema_instruction(schema_name, schema))
            try:
                message, call = self._complete(messages, kwargs, mode, prompt_version, cache_salt, reply)
                return message.get("content"), call
            except _Unsupported:
                mode = self._fall_back("structured", self.profile.structured_mode, mode, _STRUCTURED_FALLBACK.get(mode))

    def _chat_prompt_tools(self, messages, tools, prompt_version, cache_salt, reply) -> dict:
        instruction = (
            "You can call these tools:\n"
            + json.dumps(tools)
            + '\nAnswer with only a JSON object: {"content": <text or null>, "tool_calls": '
            '[{"name": <tool name>, "arguments": <object>}]}. Use an empty tool_calls list to reply to the user.'
        )
        flattened = _with_system([_flatten_tool_message(m) for m in messages], instruction)
        message, call = self._complete(flattened, {}, ToolMode.PROMPT, prompt_version, cache_salt, reply)
        try:
            return _prompt_tool_message(parse_json_answer(message.get("content")))
        except ValueError as exc:
            self._mark_invalid(call, "invalid_json", f"tool-call JSON: {exc}")
            raise LLMError("invalid_output", f"tool-call answer is not the expected JSON: {exc}") from exc

    # -- transport -----------------------------------------------------------------------------

    def _complete(self, messages, extra, mode, prompt_version, cache_salt, reply) -> tuple[dict, LLMCall]:
        profile = self.profile
        request = {
            "model": profile.model,
            "messages": messages,
            "temperature": profile.temperature,
            "max_tokens": profile.max_tokens,
            **extra,
        }
        # The endpoint is part of the key: the same model name on two servers is not the same model.
        request_hash = content_hash({**request, "endpoint": profile.base_url, "salt": cache_salt})
        record = dict(request=request, request_hash=request_hash, mode=mode, prompt_version=prompt_version)
        if profile.cache_enabled:
            cached = self._cached(**record)
            if cached:
                reply.calls.append(cached)
                return cached.response["message"], cached

        attempts = max(1, settings.SIMIA_LLM_MAX_ATTEMPTS)
        last_error = ""
        for attempt in range(1, attempts + 1):
            result, latency_ms = self._send(request)
            if isinstance(result, Exception):
                kind, transient = _failure_kind(result, offers_options=bool(extra))
                failure = _redact_key(str(result), profile)  # some servers echo the key in a 401
                reply.calls.append(
                    self._record(**record, attempt=attempt, latency_ms=latency_ms, error=failure, error_kind=kind)
                )
                if kind == "unsupported_mode":
                    raise _Unsupported() from result
                if not transient:
                    raise LLMError(kind, failure[:500]) from result
                last_error = f"{kind}: {failure[:300]}"
                if attempt < attempts:
                    time.sleep(_retry_after(result) or self._backoff(attempt))
                continue

            choice = result["choices"][0]
            message = _message_dict(choice.get("message") or {})
            usage = result.get("usage") or {}
            tokens_in = usage.get("prompt_tokens") or 0
            tokens_out = usage.get("completion_tokens") or 0
            finish_reason = choice.get("finish_reason")
            truncated = finish_reason == "length"
            call = self._record(
                **record,
                attempt=attempt,
                latency_ms=latency_ms,
                response={"message": message, "finish_reason": finish_reason},
                tokens_in=tokens_in,
                tokens_out=tokens_out,
                error="the answer was cut off (finish_reason=length)" if truncated else "",
                error_kind="truncated" if truncated else "",
            )
            reply.calls.append(call)
            if truncated:
                last_error = "truncated: finish_reason=length"
                continue
            return message, call
        kind = last_error.split(":", 1)[0] or "unavailable"
        raise LLMError(kind, f"gave up after {attempts} attempts; last: {last_error}")

    def _send(self, request: dict) -> tuple[Any, int]:
        """One HTTP request: (the completion, or the exception it raised; latency in ms, queueing excluded)."""
        # An LLM call takes seconds to minutes: inside a transaction it would hold the transaction's locks
        # (all of SQLite's writes) that long. Tests that run inside a transaction of their own allow it.
        if len(connection.atomic_blocks) > settings.SIMIA_LLM_ATOMIC_BLOCKS_ALLOWED:
            raise RuntimeError("an LLM call inside a database transaction: make the call first, then write")
        exchange_ms.set(0)
        try:
            # The raw POST skips the SDK's typed request/response models (a third of a call's CPU) while
            # keeping its timeouts, error classes and auth; the body is plain JSON either way, here written
            # by orjson (several times faster than the SDK's json.dumps).
            client, url = _openai_client(self.profile)
            response = client.post(
                url,
                content=orjson.dumps(request, option=orjson.OPT_NON_STR_KEYS),
                cast_to=httpx2.Response,
                options={"headers": {"X-Simia-Stage": self.stage, **_PER_REQUEST_DROPPED_HEADERS}},
            )
            result = orjson.loads(response.content)
            if not isinstance(result, dict) or not result.get("choices"):
                result = _MalformedResponse("the response has no choices")
        except (openai.APIError, ValueError) as exc:  # ValueError: a 200 whose body is not JSON
            result = exc
        except httpx2.TransportError as exc:  # defensive: the SDK maps these to APIConnectionError
            result = openai.APIConnectionError(request=exc.request)
        return result, exchange_ms.get()

    def _backoff(self, attempt: int) -> float:
        base = settings.SIMIA_LLM_BACKOFF_BASE
        return base * (2 ** (attempt - 1)) * (0.5 + random.random())

    def _cached(self, *, request, request_hash, mode, prompt_version) -> LLMCall | None:
        hit = (
            LLMCall.objects.filter(request_hash=request_hash, error="", response__isnull=False, cache_hit=False)
            .order_by("-id")
            .first()
        )
        if hit is None:
            return None
        return self._record(
            request=request,
            request_hash=request_hash,
            mode=mode,
            prompt_version=prompt_version,
            attempt=1,
            latency_ms=0,
            response=hit.response,
            cache_hit=True,
        )

    def _record(
        self,
        *,
        request,
        request_hash,
        mode,
        prompt_version,
        attempt,
        latency_ms,
        response=None,
        tokens_in=0,
        tokens_out=0,
        error="",
        error_kind="",
        cache_hit=False,
    ) -> LLMCall:
        call = LLMCall(
            stage=self.stage,
            profile=self.profile,
            model=self.profile.model,
            job_id=self.job_id,
            request_hash=request_hash,
            prompt_version=prompt_version,
            request=request,
            response=response,
            error=error[:4000],
            error_kind=error_kind,
            attempt=attempt,
            mode=mode,
            tokens_in=tokens_in,
            tokens_out=tokens_out,
            latency_ms=latency_ms,
            cache_hit=cache_hit,
            cost=Decimal(0) if cache_hit else _cost(self.profile, tokens_in, tokens_out),
        )
        return llm_call_record(call)

    @staticmethod
    def _mark_invalid(call: LLMCall | None, kind: str, problem: str) -> None:
        if call is not None:
            llm_call_mark_invalid(call, kind=kind, problem=problem)


class _Unsupported(Exception):
    """The endpoint rejected a request option (json_schema, tools): fall back to a weaker mode."""


class _MalformedResponse(Exception):
    """A 200 answer the app cannot use (no choices); retried like a server error."""


def _failure_kind(exc: Exception, *, offers_options: bool) -> tuple[str, bool]:
    """(error kind, whether to retry) for a request that raised."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", True
    if isinstance(exc, openai.APIConnectionError):
        return "connection_error", True
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        if status == 429:
            return "rate_limited", True
        if status >= 500:
            return "server_error", True
        if status in (408, 409):  # request timeout, lock conflict: worth another try
            return f"http_{status}", True
        if status in (400, 422):
            if offers_options and _UNSUPPORTED_HINTS.search(str(exc)):
                return "unsupported_mode", False
            return "bad_request", False
        return f"http_{status}", False  # 401, 403, 404...: retrying will not help
    return "bad_response", True  # a body that is not a chat completion


def _message_dict(message: dict) -> dict:
    """The canonical assistant message from a completion's message (ids filled in, arguments as text)."""
    result: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    calls = [c for c in message.get("tool_calls") or [] if isinstance(c, dict)]
    if calls:
        result["tool_calls"] = [
            {
                "id": call.get("id") or f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {
                    "name": (call.get("function") or {}).get("name", ""),
                    "arguments": _arguments_text((call.get("function") or {}).get("arguments")),
                },
            }
            for call in calls
        ]
    return result


def _arguments_text(arguments: Any) -> str:
    """Canonical arguments are a JSON string; some servers send an object instead."""
    if isinstance(arguments, str):
        return arguments or "{}"
    return json.dumps(arguments if arguments is not None else {})


def _arguments_object(arguments: str) -> Any:
    """Show past calls to the model in the same shape it is asked to answer with."""
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments


def _prompt_tool_message(answer: Any) -> dict:
    """The canonical assistant message for a prompt-mode answer {"content", "tool_calls": [{name, arguments}]}."""
    if not isinstance(answer, dict):
        raise ValueError("the answer is not a JSON object")
    content, calls = answer.get("content"), answer.get("tool_calls") or []
    if content is not None and not isinstance(content, str):
        raise ValueError("content must be text or null")
    if not isinstance(calls, list):
        raise ValueError("tool_calls must be a list")
    message: dict[str, Any] = {"role": "assistant", "content": content}
    canonical = []
    for call in calls:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            raise ValueError("every tool call needs a name")
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):
            arguments = json.loads(arguments or "{}")
        if not isinstance(arguments, dict):
            raise ValueError(f"arguments of {call['name']} must be an object")
        canonical.append(
            {
                "id": f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": call["name"], "arguments": json.dumps(arguments)},
            }
        )
    if canonical:
        message["tool_calls"] = canonical
    return message


def _schema_name(name: str) -> str:
    """OpenAI accepts only [a-zA-Z0-9_-]{1,64} as a json_schema name."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "answer"


def _schema_instruction(schema_name: str, schema: dict) -> str:
    return (
        f"Reply with only a JSON object (no prose, no code fence) named {schema_name}, "
        f"valid against this JSON Schema:\n{json.dumps(schema)}"
    )


def _with_system(messages: list[dict], instruction: str) -> list[dict]:
    """Add an instruction to the system message; some chat templates accept only one, and only first."""
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{instruction}".strip()}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def _flatten_tool_message(message: dict) -> dict:
    """For endpoints without tool support: tool calls and results become plain text turns."""
    if message.get("role") == "tool":
        return {
            "role": "user",
            "content": f"[tool result {message.get('tool_call_id', '')}] {message.get('content', '')}",
        }
    if message.get("role") == "assistant" and message.get("tool_calls"):
        calls = [
            {"name": c["function"]["name"], "arguments": _arguments_object(c["function"]["arguments"])}
            for c in message["tool_calls"]
        ]
        return {"role": "assistant", "content": json.dumps({"content": message.get("content"), "tool_calls": calls})}
    return message


def client_for_stage(stage: str, *, job_id: int | None = None, profile_id: int | None = None) -> LLMClient:
    from .selectors import profile_for_stage

    return LLMClient(profile_for_stage(stage, profile_id), stage=stage, job_id=job_id)
