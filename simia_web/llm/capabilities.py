"""What an endpoint takes, found with tiny requests: structured-output and tool modes, and its context window.

`endpoint_check` runs the probes ("Test endpoint" in the admin, `manage.py check_endpoint`) and
records the modes it chose, the window and the evidence on the profile; the client starts from them.
The context window alone is also looked up, once, the first time a profile without one is used.

It also measures the endpoint's pace (`_pace_measure`): how many requests it works on at once (the
slots llama.cpp's /props reports, or what timing one, two, then four prompts sent together shows),
how fast it reads a prompt and writes an answer, and from those how long a 4k-token prompt and a small
synthesis take. The slots start the adaptive concurrency limit (adaptive.py). The timed requests go
around the endpoint's limits: sent through them, a limit already down to one would measure itself.
"""

import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

import httpx2
import openai
import orjson

from simia_web.core.db import db_connection_give_back
from simia_web.core.jsonutil import compact_json
from simia_web.core.schemas import first_error
from simia_web.formats.answers import parse_json_answer

from .adaptive import work_bytes
from .endpoints import endpoint_client
from .keys import profile_api_key
from .limits import endpoint_limiter
from .models import EndpointProfile, StructuredMode, ToolMode
from .selectors import profile_findings
from .services import profile_capabilities_record, profile_context_window_learn

PROBE_MAX_TOKENS = 48
_PROBE_SCHEMA = {  # an answer no model writes unless the schema reaches it
    "type": "object",
    "properties": {"colour": {"type": "string", "enum": ["teal"]}, "count": {"type": "integer"}},
    "required": ["colour", "count"],
    "additionalProperties": False,
}
_PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
# A tool with one free-text argument (bounded, so the probe ends in seconds even where max_tokens is not honoured).
_NOTE_TOOL = {
    "type": "function",
    "function": {
        "name": "save_note",
        "description": "Save a note.",
        "parameters": {
            "type": "object",
            "properties": {"text": {"type": "string", "maxLength": 400}},
            "required": ["text"],
        },
    },
}
_BOUNDED_ANSWER_TOKENS = 8
_OLLAMA_DEFAULT_CTX = 4096  # what Ollama serves when the model's parameters set no num_ctx
_discovered: dict[tuple, int | None] = {}
_discovery_lock = threading.Lock()


@dataclass
class Probe:
    name: str
    status: int  # HTTP status, 0 when the server could not be reached
    verdict: str  # "honoured", "ignored", "refused", "accepted", "unreachable", "found", "absent"
    detail: str


def profile_context_window(*, profile: EndpointProfile) -> int | None:
    """The window the profile's server reports, looked up once per process and recorded on the profile."""
    if "context_window_source" in profile_findings(profile):
        return profile.context_window
    key = (profile.pk, profile.base_url, profile.model)
    # The thread that looks it up needs a connection to record it, and may have given its own back.
    db_connection_give_back()
    with _discovery_lock:
        if key not in _discovered:
            window, source, _probes = _context_window_lookup(profile)
            profile_context_window_learn(profile=profile, context_window=window, source=source)
            _discovered[key] = window
    return _discovered[key]


def endpoint_check(*, profile: EndpointProfile) -> dict:
    """Probe the endpoint and record what it takes on the profile; returns what was recorded."""
    window, source, probes = _context_window_lookup(profile)
    structured, structured_probes = _structured_mode(profile)
    tools, tool_probes = _tool_mode(profile)
    pace, pace_probes = _pace_measure(profile)
    found = {
        "checked_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "structured": structured,
        "tools": tools,
        "context_window_source": source,
        "concurrency": pace,
        "evidence": [asdict(p) for p in probes + structured_probes + tool_probes + pace_probes],
    }
    profile_capabilities_record(profile=profile, found=found, context_window=window)
    if pace.get("slots"):
        endpoint_limiter(profile).adaptive_start(pace["slots"], pace.get("noload") or 0.0)
    return {**found, "context_window": profile.context_window}


# -- context window ------------------------------------------------------------------------------


def _context_window_lookup(profile: EndpointProfile) -> tuple[int | None, str, list[Probe]]:
    """(window, where it came from, evidence) from vLLM's /v1/models, llama.cpp's /props or Ollama's /api/show."""
    base = (profile.base_url or "https://api.openai.com/v1").rstrip("/")
    root = base.removesuffix("/v1")
    probes = []

    status, body = _request(profile, "GET", f"{base}/models")
    listed = [m for m in (body.get("data") or [] if isinstance(body, dict) else []) if isinstance(m, dict)]
    # The profile's model, or the one model a server serves whatever name it is asked for.
    served = [m for m in listed if m.get("id") == profile.model] or (listed if len(listed) == 1 else [])
    if served and served[0].get("max_model_len"):
        window = int(served[0]["max_model_len"])
        probes.append(Probe("/v1/models max_model_len", status, "found", str(window)))
        return window, "/v1/models max_model_len", probes
    probes.append(Probe("/v1/models max_model_len", status, "absent", _excerpt(body)))

    status, body = _request(profile, "GET", f"{root}/props")
    props = body if isinstance(body, dict) else {}
    n_ctx = props.get("n_ctx") or (props.get("default_generation_settings") or {}).get("n_ctx")
    if n_ctx:
        probes.append(Probe("/props n_ctx", status, "found", str(n_ctx)))
        return int(n_ctx), "/props n_ctx", probes
    probes.append(Probe("/props n_ctx", status, "absent", _excerpt(body)))

    status, body = _request(profile, "POST", f"{root}/api/show", {"model": profile.model})
    if isinstance(body, dict) and ("model_info" in body or "parameters" in body):
        window = _ollama_window(body)
        probes.append(Probe("/api/show", status, "found", str(window)))
        return window, "Ollama /api/show", probes
    probes.append(Probe("/api/show", status, "absent", _excerpt(body)))
    return None, "not reported", probes


def _ollama_window(show: dict) -> int:
    for line in str(show.get("parameters") or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    lengths = [v for k, v in (show.get("model_info") or {}).items() if k.endswith(".context_length")]
    return min([_OLLAMA_DEFAULT_CTX, *[int(v) for v in lengths if isinstance(v, int)]])


# -- modes ---------------------------------------------------------------------------------------


def _structured_mode(profile: EndpointProfile) -> tuple[str, list[Probe]]:
    """The strongest structured-output mode whose answer follows the probe schema."""
    ask = [{"role": "user", "content": "Describe the sky in one JSON object."}]
    instruction = f"Reply with only a JSON object valid against this JSON Schema: {compact_json(_PROBE_SCHEMA)}"
    in_prompt = [{"role": "system", "content": instruction}, *ask]
    attempts = [
        (StructuredMode.JSON_SCHEMA, ask, {"type": "json_schema", "json_schema": _json_schema_format()}),
        (StructuredMode.JSON_OBJECT_SCHEMA, ask, {"type": "json_object", "schema": _PROBE_SCHEMA}),
        (StructuredMode.JSON_OBJECT, in_prompt, {"type": "json_object"}),
        (StructuredMode.PROMPT, in_prompt, None),
    ]
    probes = []
    for mode, messages, response_format in attempts:
        extra = {"response_format": response_format} if response_format else {}
        status, body = _complete(profile, messages, extra)
        content = _message(body).get("content")
        if status != 200:
            probes.append(Probe(mode, status, "refused" if status else "unreachable", _excerpt(body)))
            continue
        try:
            valid = first_error(_PROBE_SCHEMA, parse_json_answer(content)) is None
        except ValueError:
            valid = False
        if mode == StructuredMode.JSON_OBJECT:  # the schema is only in the prompt: any JSON object honours the mode
            valid = _is_json_object(content)
        probes.append(Probe(mode, status, "honoured" if valid else "ignored", _excerpt(content)))
        if valid:
            return mode, probes
    return StructuredMode.PROMPT, probes


def _tool_mode(profile: EndpointProfile) -> tuple[str, list[Probe]]:
    """Native when a named tool_choice gets a call and tool_choice "auto" is accepted, else tools in the prompt."""
    ask = [{"role": "user", "content": "What is the weather in Paris? Use the tool."}]
    probes = []
    choices = [
        ("tools, tool_choice named", {"type": "function", "function": {"name": "get_weather"}}),
        ("tools, tool_choice auto", "auto"),
        ("tools without tool_choice", None),
    ]
    outcomes = {}
    for name, choice in choices:
        extra: dict[str, Any] = {"tools": [_PROBE_TOOL]}
        if choice is not None:
            extra["tool_choice"] = choice
        status, body = _complete(profile, ask, extra)
        calls = [c.get("function", {}).get("name") for c in _message(body).get("tool_calls") or []]
        if status != 200:
            verdict = "refused" if status else "unreachable"
        else:
            verdict = "honoured" if "get_weather" in calls else "accepted" if choice == "auto" else "ignored"
        outcomes[name] = verdict
        probes.append(Probe(name, status, verdict, _excerpt(calls or _message(body).get("content") or body)))
    native = outcomes["tools, tool_choice named"] == "honoured" and outcomes["tools, tool_choice auto"] != "refused"
    if native:
        probe = _tool_answer_bounded(profile)
        probes.append(probe)
        native = probe.verdict != "ignored"
    return (ToolMode.NATIVE if native else ToolMode.PROMPT), probes


def _tool_answer_bounded(profile: EndpointProfile) -> Probe:
    """Whether an answer with tools offered ("auto") stops at max_tokens. llama-cpp-python's function-calling chat
    format writes such answers with no limit at all: a small model filling a free-text argument then runs on to the
    end of its context, minutes a call. The probe's note is bounded by its schema (maxLength), so this request ends
    in seconds either way; with tools in the prompt the server's plain chat path honours max_tokens."""
    ask = [{"role": "user", "content": "Write a note of about 100 words on the sea, then save it with the tool."}]
    extra = {"tools": [_NOTE_TOOL], "tool_choice": "auto", "max_tokens": _BOUNDED_ANSWER_TOKENS}
    status, body = _complete(profile, ask, extra)
    name = f"tools, tool_choice auto, max_tokens={_BOUNDED_ANSWER_TOKENS}"
    if status != 200:
        return Probe(name, status, "refused" if status else "unreachable", _excerpt(body))
    written = ((body.get("usage") or {}) if isinstance(body, dict) else {}).get("completion_tokens") or 0
    verdict = "ignored" if written > 2 * _BOUNDED_ANSWER_TOKENS else "honoured"
    return Probe(name, status, verdict, f"{written} answer tokens")


# -- pace ----------------------------------------------------------------------------------------

_PACE_PROMPT_WORDS = 200  # about 256 tokens: a few seconds on a small CPU server, a blink on a GPU
_PACE_ANSWER_TOKENS = 32
_PACE_PARALLEL = (2, 4)  # prompts sent together, the next only while the last ran side by side
_PACE_SIDE_BY_SIDE = 1.5  # n prompts sent together that take less than this x one alone ran side by side
# The calls of a small synthesis (1 domain, 3 APIs, 2 tasks, 1 rollout each): (calls, prompt tokens, answer tokens),
# as measured against llama-cpp-python (docs/performance.md, "A one-slot local server").
SMALL_SYNTHESIS_CALLS = (
    ("api_synthesis", 1, 700, 1400),
    ("task_synthesis", 1, 1500, 500),
    ("agent", 8, 1800, 120),
    ("simulator", 6, 2000, 250),
    ("user_simulator", 4, 900, 60),
    ("judge", 2, 2400, 200),
)


def _pace_measure(profile: EndpointProfile) -> tuple[dict, list[Probe]]:
    """The endpoint's slots and speeds, measured with a few timed requests sent around its limits."""
    probes = []
    root = (profile.base_url or "https://api.openai.com/v1").rstrip("/").removesuffix("/v1")
    status, body = _request(profile, "GET", f"{root}/props")
    reported = body.get("total_slots") if isinstance(body, dict) else None
    probes.append(Probe("/props total_slots", status, "found" if reported else "absent", str(reported or "")[:300]))
    with _unlimited_client(profile) as client:
        # The first request after a server starts also pays its warm-up (loading, allocating the context): a prompt
        # alone is the faster of two, or slots would be read from a first time several times too long.
        alone = min(
            (_timed(client, profile, _pace_prompt(), max_tokens=1) for _ in range(2)),
            key=lambda timed: (bool(timed["error"]), timed.get("seconds", float("inf"))),
        )
        if alone["error"]:
            probes.append(Probe("pace: one prompt alone", alone["status"], "refused", alone["error"]))
            return {"summary": "could not time a prompt: " + alone["error"][:200]}, probes
        prompt_rate = alone["prompt_tokens"] / alone["seconds"]
        probes.append(Probe("pace: one prompt alone", 200, "found", f"{alone['seconds']:.2f} s"))
        if reported:
            slots, source, at_least = int(reported), "/props total_slots", False
        else:
            slots, at_least = _slots_measure(client, profile, alone["seconds"], probes)
            source = "measured"
        answer = _timed(client, profile, _count_prompt(), max_tokens=_PACE_ANSWER_TOKENS)
    answer_rate = None
    if not answer["error"] and answer["answer_tokens"] >= 4:
        writing = max(0.05, answer["seconds"] - answer["prompt_tokens"] / prompt_rate)
        answer_rate = answer["answer_tokens"] / writing
        probes.append(Probe("pace: an answer", 200, "found", f"{answer['answer_tokens']} tokens in {writing:.2f} s"))
    pace = {
        "slots": min(slots, max(1, profile.max_concurrency)),
        "slots_source": source,
        "slots_at_least": at_least,
        "prompt_tokens_per_second": round(prompt_rate, 1),
        "answer_tokens_per_second": round(answer_rate, 1) if answer_rate else None,
        "seconds_per_4k_prompt": round(4096 / prompt_rate, 1),
        "noload": alone["seconds"] * 1000 / work_bytes(alone["sent"], alone["received"]),
        "base_url": profile.base_url,  # what the figures are about: the adaptive limit starts from them only there
        "model": profile.model,
    }
    pace["small_synthesis_seconds"] = _small_synthesis_seconds(pace)
    pace["summary"] = pace_summary(pace)
    return pace, probes


def _slots_measure(client: openai.OpenAI, profile: EndpointProfile, alone: float, probes: list) -> tuple[int, bool]:
    """(slots, whether there may be more): prompts sent together, two then four, until they stop running side by
    side; n prompts that take k times as long as one alone ran on about n / k slots."""
    for together in _PACE_PARALLEL:
        with ThreadPoolExecutor(together) as pool:
            started = time.monotonic()
            answers = list(pool.map(lambda _: _timed(client, profile, _pace_prompt(), max_tokens=1), range(together)))
            took = time.monotonic() - started
        probes.append(Probe(f"pace: {together} prompts together", 200, "found", f"{took:.2f} s"))
        if any(a["error"] for a in answers) or took >= _PACE_SIDE_BY_SIDE * alone:
            return max(1, min(together - 1, round(together * alone / took))), False
    return _PACE_PARALLEL[-1], True


def _small_synthesis_seconds(pace: dict) -> int:
    prompt_rate, answer_rate = pace["prompt_tokens_per_second"], pace["answer_tokens_per_second"] or 20.0
    work = sum(n * (prompt / prompt_rate + answer / answer_rate) for _, n, prompt, answer in SMALL_SYNTHESIS_CALLS)
    return round(work / max(1, min(pace["slots"], 4)))  # a small synthesis has about four calls to make at once


def pace_summary(pace: dict) -> str:
    """The measurement in words: "1 request at a time; 85 prompt tokens/s; a 4k-token prompt takes about 48 s; ..."."""
    if "prompt_tokens_per_second" not in pace:
        return pace.get("summary", "")
    slots = pace["slots"]
    at_once = "1 request at a time" if slots == 1 else f"{slots}{' or more' if pace['slots_at_least'] else ''} at once"
    parts = [
        f"{at_once} ({'reported' if pace['slots_source'] != 'measured' else 'measured'})",
        f"{pace['prompt_tokens_per_second']:.0f} prompt tokens/s",
    ]
    if pace.get("answer_tokens_per_second"):
        parts.append(f"{pace['answer_tokens_per_second']:.0f} answer tokens/s")
    parts.append(f"a 4k-token prompt takes about {_duration(pace['seconds_per_4k_prompt'])}")
    calls = sum(calls for _, calls, _, _ in SMALL_SYNTHESIS_CALLS)
    parts.append(
        f"a small synthesis (1 domain, 3 APIs, 2 tasks, 1 rollout: about {calls} calls) takes about "
        f"{_duration(pace['small_synthesis_seconds'])}"
    )
    return "; ".join(parts)


def _duration(seconds: float) -> str:
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def _pace_prompt() -> list[dict]:
    """A prompt of about 256 tokens that no cache of the server has seen: it starts with a fresh nonce."""
    words = " ".join(f"item{i % 50}" for i in range(_PACE_PROMPT_WORDS))
    return [{"role": "user", "content": f"{uuid.uuid4().hex} Say OK. Ignore this list: {words}"}]


def _count_prompt() -> list[dict]:
    return [{"role": "user", "content": f"{uuid.uuid4().hex[:8]} Count from 1 to 100, separated by spaces."}]


def _unlimited_client(profile: EndpointProfile) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=profile.base_url or None,
        api_key=profile_api_key(profile) or "not-needed",
        timeout=max(profile.timeout_seconds, 120.0),
        max_retries=0,
    )


def _timed(client: openai.OpenAI, profile: EndpointProfile, messages: list[dict], *, max_tokens: int) -> dict:
    """One completion's time and token counts (the prompt's estimated at 4 characters a token if not reported)."""
    body = {"model": profile.model, "messages": messages, "max_tokens": max_tokens, "temperature": 0}
    content = orjson.dumps(body)
    started = time.monotonic()
    timed = {"status": 0, "error": "", "sent": len(content), "received": 0, "prompt_tokens": 0, "answer_tokens": 0}
    try:
        response = client.post("/chat/completions", content=content, cast_to=httpx2.Response)
        timed["seconds"] = max(1e-3, time.monotonic() - started)
        timed["status"], timed["received"] = response.status_code, len(response.content)
        usage = orjson.loads(response.content).get("usage") or {}
    except (openai.APIError, orjson.JSONDecodeError, AttributeError) as exc:
        return {**timed, "error": str(exc)[:300] or type(exc).__name__, "status": getattr(exc, "status_code", 0)}
    prompt_chars = sum(len(m["content"]) for m in messages)
    timed["prompt_tokens"] = usage.get("prompt_tokens") or prompt_chars // 4
    timed["answer_tokens"] = usage.get("completion_tokens") or 0
    return timed


# -- requests ------------------------------------------------------------------------------------


def _complete(profile: EndpointProfile, messages: list[dict], extra: dict) -> tuple[int, Any]:
    _client, url = endpoint_client(profile)
    body = {"model": profile.model, "messages": messages, "max_tokens": PROBE_MAX_TOKENS, "temperature": 0, **extra}
    return _request(profile, "POST", url, body)


def _request(profile: EndpointProfile, method: str, url: str, body: dict | None = None) -> tuple[int, Any]:
    """(status, JSON body or text) of one request to the profile's server; (0, reason) when unreachable."""
    client, _url = endpoint_client(profile)
    try:
        if method == "GET":
            response = client.get(url, cast_to=httpx2.Response)
        else:
            response = client.post(url, content=orjson.dumps(body), cast_to=httpx2.Response)
    except openai.APIStatusError as exc:
        return exc.status_code, exc.body if exc.body is not None else exc.message
    except openai.APIError as exc:
        return 0, str(exc)
    try:
        return response.status_code, orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return response.status_code, response.text


def _json_schema_format() -> dict:
    return {"name": "probe", "schema": _PROBE_SCHEMA, "strict": True}


def _message(body: Any) -> dict:
    try:
        return body["choices"][0]["message"] or {}
    except (KeyError, IndexError, TypeError):
        return {}


def _is_json_object(text: str | None) -> bool:
    try:
        return isinstance(parse_json_answer(text), dict)
    except ValueError:
        return False


def _excerpt(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value, default=str).decode()
    return text[:300]
