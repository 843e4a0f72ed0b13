"""The one way the app talks to an LLM: the `openai` client against any OpenAI-compatible endpoint.

Every HTTP attempt becomes an LLMCall row. Transient failures (429, 5xx, timeouts, connection
errors, malformed responses) back off and retry; deterministic ones (a 400/422, or a 5xx carrying a
request validation error) do not. In auto mode the client starts from the modes `check_endpoint`
found, and an endpoint that refuses an option we sent (`response_format`, `json_schema`, `tools`,
`tool_choice`) falls back once to a weaker mode, remembered on the profile. Structured answers are
validated against their JSON Schema with one repair retry that quotes the error.

Every call is sized to the profile's context window (see budget.py): the prompt is trimmed to what
is left beside the stage's answer, a refusal that names the window teaches it, and a cut-off answer
is retried once with more room, or reported as truncated, never resent unchanged.
"""

import logging
import random
import re
import time
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import httpx2
import openai
import orjson
from django.conf import settings
from django.db import connection

from simia_web.core.jsonutil import compact_json, content_hash
from simia_web.core.schemas import first_error
from simia_web.formats.answers import parse_json_answer
from simia_web.formats.conversation import message_text, messages_lenient
from simia_web.formats.prompt_tools import (
    prompt_tools_history,
    prompt_tools_instruction,
    prompt_tools_message,
    prompt_tools_schema,
)

from .budget import (
    ASSUMED_CONTEXT_WINDOW,
    CONSERVATIVE_CHARS_PER_TOKEN,
    SAFETY_SHARE,
    SAFETY_TOKENS,
    messages_fit,
    prompt_token_room,
    stage_max_tokens,
)
from .capabilities import profile_context_window
from .endpoints import PER_REQUEST_DROPPED_HEADERS, endpoint_client
from .keys import profile_api_key
from .limits import endpoint_limiter
from .models import EndpointProfile, LLMCall, StructuredMode, ToolMode
from .selectors import profile_findings, profile_for_stage
from .services import (
    llm_call_ids,
    llm_call_mark_invalid,
    llm_call_record,
    profile_capability_learn,
    profile_context_window_learn,
    profile_learned_store,
)
from .transport import exchange_ms

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


_downgrades: dict[tuple, str] = {}  # (profile key, "structured"|"tools") -> weaker mode learned at run time
_ratios: dict[tuple, float] = {}  # profile key -> characters per prompt token learned in this process
_learned_stored: dict[tuple, float] = {}  # (profile key, field) -> what this process last wrote to the profile
_rates: dict[tuple, float] = {}  # profile key -> answer tokens per second of a call (the slow end)

_STRUCTURED_FALLBACK: dict[str, StructuredMode] = {
    StructuredMode.JSON_SCHEMA: StructuredMode.JSON_OBJECT_SCHEMA,
    StructuredMode.JSON_OBJECT_SCHEMA: StructuredMode.JSON_OBJECT,
    StructuredMode.JSON_OBJECT: StructuredMode.PROMPT,
}
# An error answer that names an option we sent and says the server does not take it, as "... is not
# supported", "does not support tools", "requires --enable-auto-tool-choice" or pydantic's "Input should
# be 'text' or 'json_object'" do. An answer that only names a function, such as an invalid schema for
# one, is a bad request.
_OPTION = r"\b(?:response_format|json_schema|json_object|tools|tool[_ ]choice)\b"  # not "tool", a role
_REFUSAL = (
    r"\b(?:not supported|unsupported|does not support|requires|unrecogni[sz]ed|not allowed|not permitted"
    r"|input should be|was unexpected|unknown (?:field|parameter|argument)|extra (?:inputs|fields))\b"
)
_UNSUPPORTED_HINTS = re.compile(rf"{_OPTION}.{{0,120}}?{_REFUSAL}|{_REFUSAL}.{{0,120}}?{_OPTION}", re.I | re.S)
# A request the server's validation rejected (pydantic, as llama-cpp-python reports it even with a 500):
# sending it again gives the same answer.
_VALIDATION_ERROR = re.compile(r"\d+ validation errors?\b|input should be|\[type=[a-z_]+|'type': '[a-z_]+_error'", re.I)
_CONTEXT_EXCEEDED = re.compile(
    r"context_length_exceeded|maximum context length|exceeds? (?:the )?(?:available )?context", re.I
)
_NAMED_WINDOW = re.compile(r"maximum context length is (\d+)|context window of (\d+)", re.I)
_NAMED_PROMPT_TOKENS = re.compile(r"(\d+) in the messages|messages resulted in (\d+) tokens", re.I)
_RATIO_WEIGHT = 0.3  # each new usage sample's share of the learned characters-per-token ratio
_RATIO_MIN_TOKENS = 32  # smaller prompts are mostly template overhead
_RATIO_BOUNDS = (1.0, 5.0)  # what tokenizers give for code, JSON and prose: a sample outside is a miscount
_TIMEOUT_GROWTH = 4  # a request may wait up to this many times the profile's timeout when its answer needs it
_PACE_MARGIN = 2  # the probe's pace may halve when the server's machine is busy
_PROMPT_TIME_MARGIN = 3  # a prompt may wait for one other at the server (the adaptive limit's probe) and vary
_RATIO_SAFETY = 0.9  # prompts vary: size them as if a tenth denser than the average seen
_RETRY_AFTER_CAP = 30.0


def _redact_key(text: str, profile: EndpointProfile) -> str:
    api_key = profile_api_key(profile)
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


class LLMClient:
    def __init__(self, profile: EndpointProfile, *, stage: str, job_id: int | None = None):
        self.profile = profile
        self.stage = stage
        self.job_id = job_id
        self.max_tokens = stage_max_tokens(profile, stage)

    # -- public calls -------------------------------------------------------------------------

    def structured(
        self,
        *,
        messages: list[dict],
        schema: dict,
        schema_name: str,
        accept: dict | None = None,
        prompt_version: str = "",
        cache_salt: str = "",
    ) -> LLMReply:
        """Ask for a JSON answer matching `schema`; returns it parsed and checked against `accept` (by default
        `schema` itself). A looser `accept` lets through an answer whose items the caller validates and keeps
        with their problems, while servers that enforce `schema` with a grammar cannot write such items."""
        reply = LLMReply(data=None)
        conversation = list(messages)
        for repair in (False, True):
            content, call, mode = self._send_structured(
                conversation, schema, schema_name, prompt_version, cache_salt, reply
            )
            try:
                data = parse_json_answer(content)
                problem = first_error(accept or schema, data)
            except ValueError as exc:
                data, problem = None, f"not valid JSON ({exc})"
            if problem is None:
                reply.data = data
                return reply
            self._mark_invalid(call, "invalid_json" if data is None else "schema_invalid", problem)
            if repair:
                raise LLMError("invalid_output", f"answer still invalid after a repair request: {problem}")
            ignored = data is None and content and mode == StructuredMode.JSON_SCHEMA
            if ignored and self.profile.structured_mode == "auto":
                # A server that honours json_schema never answers in prose: it took the option and ignored it.
                self._fall_back("structured", mode, _STRUCTURED_FALLBACK[mode], evidence="prose answer in json_schema")
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
        self,
        *,
        messages: list[dict],
        tools: list[dict] | None = None,
        instruction: str = "",
        prompt_version: str = "",
        cache_salt: str = "",
    ) -> LLMReply:
        """One assistant turn with native tool calling (or tool calls as JSON where unsupported). A turn with
        neither text nor a tool call (small models on llama-cpp-python write them) is asked for once more.
        An `instruction` is added to the system prompt for this turn only."""
        reply = LLMReply(data=None)
        if instruction:
            messages = _with_system(messages, instruction)
        for last_try in (False, True):
            reply.data = self._turn(messages, tools, prompt_version, cache_salt, reply)
            if last_try or reply.data.get("tool_calls") or message_text(reply.data).strip():
                return reply
            self._mark_invalid(reply.last_call, "empty_answer", "the answer has neither text nor a tool call")
        raise AssertionError("unreachable")

    def _turn(self, messages, tools, prompt_version, cache_salt, reply) -> dict:
        mode = self._mode("tools", self.profile.tool_mode, ToolMode.NATIVE)
        if not tools:
            if mode == ToolMode.PROMPT:  # the endpoint takes no tool calls, not even in the history
                messages = prompt_tools_history(messages)
            return self._complete(messages, {}, ToolMode.NATIVE, prompt_version, cache_salt, reply)[0]
        while True:
            try:
                if mode == ToolMode.PROMPT:
                    return self._chat_prompt_tools(messages, tools, prompt_version, cache_salt, reply)
                return self._complete(messages, {"tools": tools}, mode, prompt_version, cache_salt, reply)[0]
            except _Unsupported as refusal:
                mode = self._fall_back("tools", mode, ToolMode.PROMPT, evidence=refusal.evidence)

    def prompt_chars_available(self, schema: dict | None = None) -> int:
        """Characters a prompt may use: the context window less this stage's answer, at the learned ratio, and
        less the answer's `schema` where the structured mode in use writes it into the prompt."""
        room = prompt_token_room(self.context_window(), self.max_tokens)
        available = int(room * self._chars_per_token() * _RATIO_SAFETY)
        mode = self._mode("structured", self.profile.structured_mode, StructuredMode.JSON_SCHEMA)
        if schema is not None and mode != StructuredMode.JSON_SCHEMA:
            available -= len(_schema_instruction("", schema)) + _SCHEMA_NAME_ROOM
        return max(0, available)

    def context_window(self) -> int:
        """The profile's window: set, reported by the server (looked up once), or the conservative assumption."""
        if self.profile.context_window:
            return self.profile.context_window
        return profile_context_window(profile=self.profile) or ASSUMED_CONTEXT_WINDOW

    # -- modes ---------------------------------------------------------------------------------

    def _mode(self, what: str, configured: str, auto_start: str) -> str:
        """A forced mode is used as is; auto starts from what was found or learned for this endpoint."""
        if configured != "auto":
            return configured
        return self._learned_or_found(what) or auto_start

    def _fall_back(self, what: str, current: str, weaker: str | None, *, evidence: str) -> str:
        configured = self.profile.structured_mode if what == "structured" else self.profile.tool_mode
        if configured != "auto" or weaker is None:
            raise LLMError("unsupported", f"the endpoint rejected {what} mode {current}")
        _downgrades[self._learned_key(what)] = weaker
        logger.warning("profile %s: falling back to %s mode for %s", self.profile.name, weaker, what)
        profile_capability_learn(profile=self.profile, what=what, mode=weaker, evidence=f"{current}: {evidence}")
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
                if mode == StructuredMode.JSON_OBJECT_SCHEMA:  # llama.cpp and llama-cpp-python enforce it
                    kwargs["response_format"] = {"type": "json_object", "schema": schema}
                elif mode == StructuredMode.JSON_OBJECT:
                    kwargs["response_format"] = {"type": "json_object"}
                messages = _with_system(conversation, _schema_instruction(schema_name, schema))
            try:
                message, call = self._complete(messages, kwargs, mode, prompt_version, cache_salt, reply)
                return message.get("content"), call, mode
            except _Unsupported as refusal:
                mode = self._fall_back("structured", mode, _STRUCTURED_FALLBACK.get(mode), evidence=refusal.evidence)

    def _chat_prompt_tools(self, messages, tools, prompt_version, cache_salt, reply) -> dict:
        flattened = _with_system(prompt_tools_history(messages), prompt_tools_instruction(tools))
        extra = self._prompt_tools_format(tools)
        message, call = self._complete(flattened, extra, ToolMode.PROMPT, prompt_version, cache_salt, reply)
        try:
            return prompt_tools_message(message.get("content"), len(messages))
        except ValueError as exc:
            self._mark_invalid(call, "invalid_json", f"tool-call JSON: {exc}")
            raise LLMError("invalid_output", f"tool-call answer is not the expected JSON: {exc}") from exc

    def _prompt_tools_format(self, tools: list[dict]) -> dict:
        """Where the endpoint is known to hold an answer to a JSON Schema (found by the probe, learned, or set), the
        tool-call answer is held to its shape: a small model then writes it whole, where free text often is not
        JSON at all. Otherwise the instruction in the prompt is all it has."""
        configured = self.profile.structured_mode
        known = configured if configured != "auto" else self._learned_or_found("structured")
        schema = prompt_tools_schema(tools)
        if known == StructuredMode.JSON_SCHEMA:
            json_schema = {"name": "tool_answer", "schema": schema, "strict": False}
            return {"response_format": {"type": "json_schema", "json_schema": json_schema}}
        if known == StructuredMode.JSON_OBJECT_SCHEMA:
            return {"response_format": {"type": "json_object", "schema": schema}}
        return {}

    def _learned_or_found(self, what: str) -> str | None:
        return _downgrades.get(self._learned_key(what)) or profile_findings(self.profile).get(what)

    # -- budget --------------------------------------------------------------------------------

    def _chars_per_token(self) -> float:
        """This stage's ratio (a simulator's JSON state is denser than a judge's prose); until it has one,
        the profile's, but no more than the conservative start."""
        stage_ratio = _ratios.get(self._learned_key(f"ratio {self.stage}"))
        profile_ratio = _ratios.get(self._learned_key("ratio"), self.profile.chars_per_token)
        return stage_ratio or min(profile_ratio, CONSERVATIVE_CHARS_PER_TOKEN)

    def _learn_ratio(self, prompt_chars: int, prompt_tokens: int) -> None:
        """Fold the usage the server reported into this stage's and this profile's characters-per-token ratios."""
        if prompt_tokens < _RATIO_MIN_TOKENS:
            return
        sample = min(max(prompt_chars / prompt_tokens, _RATIO_BOUNDS[0]), _RATIO_BOUNDS[1])
        for key in (self._learned_key(f"ratio {self.stage}"), self._learned_key("ratio")):
            ratio = _ratios.get(key)
            # Denser text counts at once, lighter text slowly: a prompt sized too large costs a refused call.
            _ratios[key] = sample if ratio is None or sample < ratio else ratio + _RATIO_WEIGHT * (sample - ratio)
        self._store_learned("chars_per_token", _ratios[self._learned_key("ratio")])

    def _timeout(self, max_tokens: int, prompt_chars: int = 0) -> float:
        """The profile's timeout, or longer when the answer asked for takes this endpoint longer to write, or the
        prompt longer to read (by the least time per unit of work the endpoint showed, see adaptive.py). It runs
        from when the request is sent: a wait for the endpoint's limits (transport.py) is not part of it."""
        base = self.profile.timeout_seconds
        rate = _rates.get(self._learned_key("rate")) or self.profile.tokens_per_second
        needed = [base]
        if rate:
            needed.append(2 * max_tokens / rate)
        alone = endpoint_limiter(self.profile).expected_seconds(prompt_chars) if prompt_chars else None
        if alone:
            needed.append(_PROMPT_TIME_MARGIN * alone)
        measured = self._probed_seconds(max_tokens, prompt_chars)
        return max(min(max(needed), _TIMEOUT_GROWTH * base), measured)

    def _probed_seconds(self, max_tokens: int, prompt_chars: int) -> float:
        """Twice what the probe's pace says a prompt of this size and an answer of max_tokens take (0 unprobed): a
        slow server (a small CPU, one slot) gets that long whatever the profile's timeout, for a request given up on
        too early keeps it busy on an answer nobody reads."""
        pace = profile_findings(self.profile).get("concurrency") or {}
        reading, writing = pace.get("prompt_tokens_per_second"), pace.get("answer_tokens_per_second")
        if not (reading and writing):
            return 0.0
        return _PACE_MARGIN * (prompt_chars / self._chars_per_token() / reading + max_tokens / writing)

    def _learn_rate(self, tokens_out: int, latency_ms: int) -> None:
        if tokens_out < _RATIO_MIN_TOKENS or latency_ms <= 0:
            return
        sample = tokens_out / (latency_ms / 1000)
        key = self._learned_key("rate")
        rate = _rates.get(key) or self.profile.tokens_per_second
        _rates[key] = rate = sample if rate is None or sample < rate else rate + _RATIO_WEIGHT * (sample - rate)
        if 2 * self.max_tokens / rate > self.profile.timeout_seconds:  # kept where it lengthens timeouts: slow servers
            self._store_learned("tokens_per_second", rate)

    def _store_learned(self, field: str, value: float) -> None:
        """Write a learned figure to the profile when it moved by a tenth, not on every call."""
        key = self._learned_key(field)
        stored = _learned_stored.get(key, getattr(self.profile, field))
        if stored is None or abs(value - stored) > 0.1 * stored:
            _learned_stored[key] = value
            profile_learned_store(profile=self.profile, field=field, value=value)

    def _fit(self, messages: list[dict], extra: dict, max_tokens: int):
        tools_chars = len(compact_json(extra["tools"])) if extra.get("tools") else 0
        room = prompt_token_room(self.context_window(), max_tokens)
        return messages_fit(
            messages, available=int(room * self._chars_per_token() * _RATIO_SAFETY), extra_chars=tools_chars
        )

    def _refit_after_overflow(self, error: str, fitted) -> bool:
        """Learn the window (and the prompt's real size) an overflow refusal names; True if a refit may fit."""
        window = next((int(n) for n in _first_groups(_NAMED_WINDOW, error)), None)
        prompt_tokens = next((int(n) for n in _first_groups(_NAMED_PROMPT_TOKENS, error)), None)
        if prompt_tokens:
            measured = min(self._chars_per_token(), fitted.chars / prompt_tokens)
            _ratios[self._learned_key(f"ratio {self.stage}")] = measured
        if window and window != self.profile.context_window:
            profile_context_window_learn(profile=self.profile, context_window=window, source="refusal naming it")
        return bool(window or prompt_tokens)

    # -- transport -----------------------------------------------------------------------------

    def _complete(self, messages, extra, mode, prompt_version, cache_salt, reply) -> tuple[dict, LLMCall]:
        profile = self.profile
        if extra.get("tools"):  # llama-cpp-python ignores tools unless a tool_choice says otherwise
            extra = {"tool_choice": "auto", **extra}
        sendable = [_sendable(m) for m in messages]
        max_tokens = self.max_tokens
        fitted = self._fit(sendable, extra, max_tokens)
        refitted = roomier = False
        timeout = self._timeout(max_tokens, fitted.chars)
        attempts = max(1, settings.SIMIA_LLM_MAX_ATTEMPTS)
        last_error = ""
        for attempt in range(1, attempts + 1):
            request = {
                "model": profile.model,
                "messages": fitted.messages,
                "temperature": profile.temperature,
                "max_tokens": max_tokens,
                **extra,
            }
            # The endpoint is part of the key: the same model name on two servers is not the same model.
            request_hash = content_hash({**request, "endpoint": profile.base_url, "salt": cache_salt})
            record = dict(request=request, request_hash=request_hash, mode=mode, prompt_version=prompt_version)
            record["trimmed"] = fitted.cuts
            if attempt == 1 and profile.cache_enabled:
                cached = self._cached(**record)
                if cached:
                    reply.calls.append(cached)
                    return cached.response["message"], cached

            result, latency_ms = self._send(request, timeout)
            if isinstance(result, Exception):
                kind, transient = _failure_kind(result, offered=extra)
                failure = _redact_key(str(result), profile)  # some servers echo the key in a 401
                reply.calls.append(
                    self._record(**record, attempt=attempt, latency_ms=latency_ms, error=failure, error_kind=kind)
                )
                if kind == "unsupported_mode":
                    raise _Unsupported(failure[:300]) from result
                if kind == "context_exceeded" and not refitted and self._refit_after_overflow(failure, fitted):
                    refitted, last_error = True, f"{kind}: {failure[:300]}"
                    fitted = self._fit(sendable, extra, max_tokens)
                    continue
                if not transient:
                    raise LLMError(kind, failure[:500]) from result
                if kind == "timeout":
                    # A slow server, likely still writing the abandoned answer: wait longer. The abandoned request
                    # keeps its lease meanwhile (limits.py), and the retry waits until the server should be done.
                    timeout = min(2 * timeout, _TIMEOUT_GROWTH * profile.timeout_seconds)
                last_error = f"{kind}: {failure[:300]}"
                if attempt < attempts:
                    time.sleep(self._retry_wait(result, kind, attempt))
                continue

            choice = result["choices"][0]
            # The answer becomes message len(messages) of the conversation; its calls' ids follow from that.
            [message], _ = messages_lenient([{**(choice.get("message") or {}), "role": "assistant"}], len(messages))
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
                error=f"the answer was cut off at max_tokens={max_tokens} (finish_reason=length)" if truncated else "",
                error_kind="truncated" if truncated else "",
            )
            reply.calls.append(call)
            self._learn_ratio(fitted.chars, tokens_in)
            self._learn_rate(tokens_out, latency_ms)
            self._learn_tools_bounded(extra, tokens_out, max_tokens)
            if truncated:
                # Resending the same request gives the same cut-off answer: only more room can help.
                room = int(self.context_window() * (1 - SAFETY_SHARE)) - SAFETY_TOKENS - tokens_in
                roomier_tokens = min(2 * max_tokens, room)
                if roomier or roomier_tokens <= max_tokens:
                    raise LLMError("truncated", f"the answer was cut off at max_tokens={max_tokens}")
                roomier, max_tokens = True, roomier_tokens
                timeout = max(timeout, self._timeout(max_tokens, fitted.chars))
                last_error = f"truncated: cut off at max_tokens={max_tokens}"
                continue
            return message, call
        kind = last_error.split(":", 1)[0] or "unavailable"
        raise LLMError(kind, f"gave up after {attempts} attempts; last: {last_error}")

    def _learn_tools_bounded(self, extra: dict, tokens_out: int, max_tokens: int) -> None:
        """An answer with tools offered written past max_tokens (llama-cpp-python's function calling sets no limit):
        the next may run to the end of the context, so tools go in the prompt from now on, where the server's plain
        chat path keeps to max_tokens. The answer itself is used as it is."""
        if extra.get("tools") and tokens_out > 2 * max_tokens and self.profile.tool_mode == "auto":
            evidence = f"an answer of {tokens_out} tokens with max_tokens={max_tokens}"
            self._fall_back("tools", ToolMode.NATIVE, ToolMode.PROMPT, evidence=evidence)

    def _send(self, request: dict, timeout: float) -> tuple[Any, int]:
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
            client, url = endpoint_client(self.profile)
            response = client.post(
                url,
                content=orjson.dumps(request, option=orjson.OPT_NON_STR_KEYS),
                cast_to=httpx2.Response,
                options={"headers": {"X-Simia-Stage": self.stage, **PER_REQUEST_DROPPED_HEADERS}, "timeout": timeout},
            )
            result = orjson.loads(response.content)
            if not isinstance(result, dict) or not result.get("choices"):
                result = _MalformedResponse("the response has no choices")
        except (openai.APIError, ValueError) as exc:  # ValueError: a 200 whose body is not JSON
            result = exc
        except httpx2.TransportError as exc:  # defensive: the SDK maps these to APIConnectionError
            result = openai.APIConnectionError(request=exc.request)
        return result, exchange_ms.get()

    def _retry_wait(self, result: Exception, kind: str, attempt: int) -> float:
        """The server's Retry-After, or our backoff; after a timeout, at least until the server should be done with
        the request given up on (limits.py), so that the retry is not sent into a server still writing that answer."""
        wait = _retry_after(result) or self._backoff(attempt)
        if kind == "timeout":
            wait = max(wait, endpoint_limiter(self.profile).abandoned_wait())
        return wait

    def _backoff(self, attempt: int) -> float:
        base = settings.SIMIA_LLM_BACKOFF_BASE
        return base * (2 ** (attempt - 1)) * (0.5 + random.random())

    def _cached(self, *, request, request_hash, mode, prompt_version, trimmed) -> LLMCall | None:
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
            trimmed=trimmed,
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
        trimmed=(),
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
            trimmed=list(trimmed),
            cost=Decimal(0) if cache_hit else _cost(self.profile, tokens_in, tokens_out),
        )
        return llm_call_record(call)

    @staticmethod
    def _mark_invalid(call: LLMCall | None, kind: str, problem: str) -> None:
        if call is not None:
            llm_call_mark_invalid(call, kind=kind, problem=problem)


class _Unsupported(Exception):
    """The endpoint rejected a request option (json_schema, tools): fall back to a weaker mode."""

    def __init__(self, evidence: str):
        self.evidence = evidence
        super().__init__(evidence)


class _MalformedResponse(Exception):
    """A 200 answer the app cannot use (no choices); retried like a server error."""


def _failure_kind(exc: Exception, *, offered: dict) -> tuple[str, bool]:
    """(error kind, whether to retry) for a request that raised; `offered` holds the options it sent."""
    if isinstance(exc, openai.APITimeoutError):
        return "timeout", True
    if isinstance(exc, openai.APIConnectionError):
        return "connection_error", True
    if isinstance(exc, openai.APIStatusError):
        status, text = exc.status_code, str(exc)
        if status == 429:
            return "rate_limited", True
        if status in (408, 409):  # request timeout, lock conflict: worth another try
            return f"http_{status}", True
        if status >= 400 and offered and _UNSUPPORTED_HINTS.search(text):
            return "unsupported_mode", False
        if status in (400, 413) and _CONTEXT_EXCEEDED.search(text):
            return "context_exceeded", False
        if status in (400, 422) or _VALIDATION_ERROR.search(text):
            return "bad_request", False
        if status >= 500:
            return "server_error", True
        return f"http_{status}", False  # 401, 403, 404...: retrying will not help
    return "bad_response", True  # a body that is not a chat completion


def _first_groups(pattern: re.Pattern, text: str):
    """The numbers a pattern's alternatives captured, first match first."""
    for match in pattern.finditer(text):
        yield from (group for group in match.groups() if group)


def _sendable(message: dict) -> dict:
    """A message every server takes: text content beside tool calls (never null), tool results as text."""
    content = message.get("content")
    if content is None and message.get("role") in ("assistant", "tool"):
        return {**message, "content": ""}
    if message.get("role") == "tool" and not isinstance(content, str):
        return {**message, "content": compact_json(content)}
    return message


def _schema_name(name: str) -> str:
    """OpenAI accepts only [a-zA-Z0-9_-]{1,64} as a json_schema name."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64] or "answer"


_SCHEMA_NAME_ROOM = 64  # the schema's name, which the instruction also carries


def _schema_instruction(schema_name: str, schema: dict) -> str:
    return (
        f"Reply with only a JSON object (no prose, no code fence) named {schema_name}, "
        f"valid against this JSON Schema:\n{compact_json(schema)}"
    )


def _with_system(messages: list[dict], instruction: str) -> list[dict]:
    """Add an instruction to the system message; some chat templates accept only one, and only first."""
    if messages and messages[0].get("role") == "system":
        first = messages[0]
        return [{**first, "content": f"{first.get('content') or ''}\n\n{instruction}".strip()}, *messages[1:]]
    return [{"role": "system", "content": instruction}, *messages]


def client_for_stage(stage: str, *, job_id: int | None = None, profile_id: int | None = None) -> LLMClient:
    return LLMClient(profile_for_stage(stage, profile_id), stage=stage, job_id=job_id)
