"""What an endpoint takes, found with tiny requests: structured-output and tool modes, and its context window.

`endpoint_check` runs the probes ("Test endpoint" in the admin, `manage.py check_endpoint`) and
records the modes it chose, the window and the evidence on the profile; the client starts from them.
The context window alone is also looked up, once, the first time a profile without one is used.
"""

import threading
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

from .endpoints import endpoint_client
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
    found = {
        "checked_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "structured": structured,
        "tools": tools,
        "context_window_source": source,
        "evidence": [asdict(p) for p in probes + structured_probes + tool_probes],
    }
    profile_capabilities_record(profile=profile, found=found, context_window=window)
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
    return (ToolMode.NATIVE if native else ToolMode.PROMPT), probes


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
