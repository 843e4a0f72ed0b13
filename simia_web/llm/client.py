"""The one way the app talks to an LLM: the `openai` client against any OpenAI-compatible endpoint.

Every HTTP attempt becomes an LLMCall row. Transient failures (429, 5xx, timeouts, connection
errors) back off and retry; endpoints that reject `json_schema` or native tools fall back to a
weaker mode; structured answers are validated against their JSON Schema with one repair retry.
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

import jsonschema
import openai
from django.conf import settings

from simia_web.core.jsonutil import content_hash

from .models import EndpointProfile, LLMCall, StructuredMode, ToolMode

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
        return [c.pk for c in self.calls]

    @property
    def last_call(self) -> LLMCall | None:
        return self.calls[-1] if self.calls else None


_clients: dict[tuple, openai.OpenAI] = {}
_semaphores: dict[tuple, threading.BoundedSemaphore] = {}
_downgrades: dict[tuple, str] = {}  # (profile id, "structured"|"tools") -> weaker mode learned at run time
_lock = threading.Lock()

_STRUCTURED_FALLBACK = {
    StructuredMode.JSON_SCHEMA: StructuredMode.JSON_OBJECT,
    StructuredMode.JSON_OBJECT: StructuredMode.PROMPT,
}
_UNSUPPORTED_HINTS = re.compile(r"response_format|json_schema|json_object|structured|tool|function", re.I)
_CODE_FENCE = re.compile(r"^\s*```(?:json)?\s*(.*?)\s*```\s*$", re.S)


def _openai_client(profile: EndpointProfile) -> openai.OpenAI:
    api_key = os.environ.get(profile.api_key_env, "") or "not-needed"
    key = (profile.base_url, api_key, profile.timeout_seconds)
    with _lock:
        if key not in _clients:
            # Retries are ours, so that every attempt is logged and counted.
            _clients[key] = openai.OpenAI(
                base_url=profile.base_url or None, api_key=api_key, timeout=profile.timeout_seconds, max_retries=0
            )
        return _clients[key]


def _semaphore(profile: EndpointProfile) -> threading.BoundedSemaphore:
    key = (profile.pk, profile.max_concurrency)
    with _lock:
        if key not in _semaphores:
            _semaphores[key] = threading.BoundedSemaphore(max(1, profile.max_concurrency))
        return _semaphores[key]


def _cost(profile: EndpointProfile, tokens_in: int, tokens_out: int) -> Decimal | None:
    if profile.price_input_per_mtok is None and profile.price_output_per_mtok is None:
        return None
    price_in = profile.price_input_per_mtok or Decimal(0)
    price_out = profile.price_output_per_mtok or Decimal(0)
    return (price_in * tokens_in + price_out * tokens_out) / Decimal(1_000_000)


def _retry_after(exc: Exception) -> float | None:
    response = getattr(exc, "response", None)
    value = response.headers.get("retry-after") if response is not None else None
    try:
        return min(float(value), 30.0) if value else None
    except ValueError:
        return None


def parse_json_answer(text: str | None) -> Any:
    """Parse a model's JSON answer, tolerating a Markdown code fence around it."""
    if not text or not text.strip():
        raise ValueError("the answer is empty")
    fenced = _CODE_FENCE.match(text)
    return json.loads(fenced.group(1) if fenced else text)


def _schema_error(data: Any, schema: dict) -> str | None:
    error = jsonschema.exceptions.best_match(jsonschema.Draft202012Validator(schema).iter_errors(data))
    if error is None:
        return None
    where = "/".join(str(p) for p in error.absolute_path) or "(root)"
    return f"at {where}: {error.message}"


class LLMClient:
    def __init__(self, profile: EndpointProfile, *, stage: str, job_id: int | None = None):
        self.profile = profile
        self.stage = stage
        self.job_id = job_id

    # -- public calls -------------------------------------------------------------------------

    def structured(
        self, *, messages: list[dict], schema: dict, schema_name: str, prompt_version: str = "", cache_salt: str = ""
    ) -> LLMReply:
        """Ask for a JSON answer matching `schema`; returns it parsed and validated."""
        reply = LLMReply(data=None)
        conversation = list(messages)
        for repair in (False, True):
            mode = self._mode("structured", self.profile.structured_mode, StructuredMode.JSON_SCHEMA)
            content, call = self._send_structured(
                conversation, schema, schema_name, mode, prompt_version, cache_salt, reply
            )
            try:
                data = parse_json_answer(content)
                problem = _schema_error(data, schema)
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
        mode = self._mode("tools", self.profile.tool_mode, ToolMode.NATIVE) if tools else ToolMode.NATIVE
        while True:
            try:
                if mode == ToolMode.PROMPT:
                    reply.data = self._chat_prompt_tools(messages, tools, prompt_version, cache_salt, reply)
                else:
                    kwargs = {"tools": tools} if tools else {}
                    message, _call = self._complete(messages, kwargs, "native", prompt_version, cache_salt, reply)
                    reply.data = message
                return reply
            except _Unsupported:
                if mode == ToolMode.PROMPT:
                    raise LLMError("unsupported", "the endpoint rejected the request in every tool mode") from None
                mode = self._downgrade("tools", ToolMode.PROMPT)

    # -- modes ---------------------------------------------------------------------------------

    def _mode(self, what: str, configured: str, auto_start: str) -> str:
        learned = _downgrades.get((self.profile.pk, what))
        if learned:
            return learned
        return auto_start if configured == "auto" else configured

    def _downgrade(self, what: str, mode: str) -> str:
        _downgrades[(self.profile.pk, what)] = mode
        logger.warning("profile %s: falling back to %s mode for %s", self.profile.name, mode, what)
        return mode

    def _send_structured(self, conversation, schema, schema_name, mode, prompt_version, cache_salt, reply):
        while True:
            kwargs: dict[str, Any] = {}
            messages = conversation
            if mode == StructuredMode.JSON_SCHEMA:
                kwargs["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": schema_name, "schema": schema, "strict": False},
                }
            else:
                if mode == StructuredMode.JSON_OBJECT:
                    kwargs["response_format"] = {"type": "json_object"}
                messages = [_schema_instruction(schema_name, schema), *conversation]
            try:
                message, call = self._complete(messages, kwargs, mode, prompt_version, cache_salt, reply)
                return message.get("content"), call
            except _Unsupported:
                if mode not in _STRUCTURED_FALLBACK:
                    raise LLMError("unsupported", "the endpoint rejected every structured-output mode") from None
                mode = self._downgrade("structured", _STRUCTURED_FALLBACK[mode])

    def _chat_prompt_tools(self, messages, tools, prompt_version, cache_salt, reply) -> dict:
        instruction = {
            "role": "system",
            "content": "You can call these tools:\n"
            + json.dumps(tools)
            + '\nAnswer with only a JSON object: {"content": <text or null>, "tool_calls": '
            '[{"name": <tool name>, "arguments": <object>}]}. Use an empty tool_calls list to reply to the user.',
        }
        flattened = [_flatten_tool_message(m) for m in messages]
        message, call = self._complete(
            [instruction, *flattened], {}, ToolMode.PROMPT, prompt_version, cache_salt, reply
        )
        try:
            answer = parse_json_answer(message.get("content"))
            calls = answer.get("tool_calls") or []
            assistant = {"role": "assistant", "content": answer.get("content")}
            if calls:
                assistant["tool_calls"] = [
                    {
                        "id": f"call_{uuid.uuid4().hex[:12]}",
                        "type": "function",
                        "function": {
                            "name": str(c.get("name", "")),
                            "arguments": c["arguments"]
                            if isinstance(c.get("arguments"), str)
                            else json.dumps(c.get("arguments", {})),
                        },
                    }
                    for c in calls
                ]
            return assistant
        except (ValueError, AttributeError, TypeError) as exc:
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
        request_hash = content_hash({**request, "salt": cache_salt})
        if profile.cache_enabled:
            cached = self._cached(request_hash, request, mode, prompt_version)
            if cached:
                reply.calls.append(cached)
                return cached.response["message"], cached

        attempts = max(1, settings.SIMIA_LLM_MAX_ATTEMPTS)
        last_error = ""
        for attempt in range(1, attempts + 1):
            started = time.monotonic()
            try:
                with _semaphore(profile):
                    completion = _openai_client(profile).chat.completions.create(
                        **request, extra_headers={"X-Simia-Stage": self.stage}
                    )
            except (openai.BadRequestError, openai.UnprocessableEntityError, openai.NotFoundError) as exc:
                unsupported = mode != ToolMode.PROMPT and bool(_UNSUPPORTED_HINTS.search(str(exc)))
                self._record(
                    request,
                    request_hash,
                    mode,
                    prompt_version,
                    attempt,
                    started,
                    error=str(exc),
                    error_kind="unsupported_mode" if unsupported else "bad_request",
                )
                if unsupported:
                    raise _Unsupported() from exc
                raise LLMError("bad_request", str(exc)[:500]) from exc
            except (
                openai.RateLimitError,
                openai.InternalServerError,
                openai.APITimeoutError,
                openai.APIConnectionError,
            ) as exc:
                kind = _transient_kind(exc)
                last_error = f"{kind}: {str(exc)[:300]}"
                call = self._record(
                    request, request_hash, mode, prompt_version, attempt, started, error=str(exc), error_kind=kind
                )
                reply.calls.append(call)
                if attempt < attempts:
                    time.sleep(_retry_after(exc) or self._backoff(attempt))
                continue
            except openai.APIStatusError as exc:
                call = self._record(
                    request,
                    request_hash,
                    mode,
                    prompt_version,
                    attempt,
                    started,
                    error=str(exc),
                    error_kind=f"http_{exc.status_code}",
                )
                reply.calls.append(call)
                raise LLMError(f"http_{exc.status_code}", str(exc)[:500]) from exc

            choice = completion.choices[0] if completion.choices else None
            message = _message_dict(choice.message) if choice else {"role": "assistant", "content": None}
            usage = completion.usage
            tokens_in = getattr(usage, "prompt_tokens", 0) or 0
            tokens_out = getattr(usage, "completion_tokens", 0) or 0
            finish = choice.finish_reason if choice else "no_choice"
            truncated = finish == "length"
            call = self._record(
                request,
                request_hash,
                mode,
                prompt_version,
                attempt,
                started,
                response={"message": message, "finish_reason": finish},
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

    def _backoff(self, attempt: int) -> float:
        base = settings.SIMIA_LLM_BACKOFF_BASE
        return base * (2 ** (attempt - 1)) * (0.5 + random.random())

    def _cached(self, request_hash, request, mode, prompt_version) -> LLMCall | None:
        hit = (
            LLMCall.objects.filter(request_hash=request_hash, error="", response__isnull=False)
            .exclude(response=None)
            .order_by("-id")
            .first()
        )
        if hit is None:
            return None
        return LLMCall.objects.create(
            stage=self.stage,
            profile=self.profile,
            model=self.profile.model,
            job_id=self.job_id,
            request_hash=request_hash,
            prompt_version=prompt_version,
            request=request,
            response=hit.response,
            mode=mode,
            cache_hit=True,
            cost=Decimal(0),
        )

    def _record(
        self,
        request,
        request_hash,
        mode,
        prompt_version,
        attempt,
        started,
        *,
        response=None,
        tokens_in=0,
        tokens_out=0,
        error="",
        error_kind="",
    ) -> LLMCall:
        return LLMCall.objects.create(
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
            latency_ms=int((time.monotonic() - started) * 1000),
            cost=_cost(self.profile, tokens_in, tokens_out),
        )

    @staticmethod
    def _mark_invalid(call: LLMCall | None, kind: str, problem: str) -> None:
        if call is not None:
            LLMCall.objects.filter(pk=call.pk).update(error=problem[:4000], error_kind=kind)
            call.error, call.error_kind = problem, kind


class _Unsupported(Exception):
    """The endpoint rejected a request option (json_schema, tools): fall back to a weaker mode."""


def _transient_kind(exc: Exception) -> str:
    if isinstance(exc, openai.RateLimitError):
        return "rate_limited"
    if isinstance(exc, openai.APITimeoutError):
        return "timeout"
    if isinstance(exc, openai.InternalServerError):
        return "server_error"
    return "connection_error"


def _message_dict(message) -> dict:
    result: dict[str, Any] = {"role": "assistant", "content": message.content}
    if message.tool_calls:
        result["tool_calls"] = [
            {
                "id": call.id or f"call_{uuid.uuid4().hex[:12]}",
                "type": "function",
                "function": {"name": call.function.name, "arguments": call.function.arguments or "{}"},
            }
            for call in message.tool_calls
        ]
    return result


def _schema_instruction(schema_name: str, schema: dict) -> dict:
    return {
        "role": "system",
        "content": f"Reply with only a JSON object (no prose, no code fence) named {schema_name}, "
        f"valid against this JSON Schema:\n{json.dumps(schema)}",
    }


def _flatten_tool_message(message: dict) -> dict:
    """For endpoints without tool support: tool calls and results become plain text turns."""
    if message.get("role") == "tool":
        return {
            "role": "user",
            "content": f"[tool result {message.get('tool_call_id', '')}] {message.get('content', '')}",
        }
    if message.get("role") == "assistant" and message.get("tool_calls"):
        calls = [
            {"name": c["function"]["name"], "arguments": c["function"]["arguments"]} for c in message["tool_calls"]
        ]
        return {"role": "assistant", "content": json.dumps({"content": message.get("content"), "tool_calls": calls})}
    return message


def client_for_stage(stage: str, *, job_id: int | None = None, profile_id: int | None = None) -> LLMClient:
    from .selectors import profile_for_stage

    return LLMClient(profile_for_stage(stage, profile_id), stage=stage, job_id=job_id)
