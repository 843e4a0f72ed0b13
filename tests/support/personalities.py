"""Behaviours of real OpenAI-compatible servers, for the scripted test server (`StubLLM.personality`).

Each personality refuses, ignores and reports what its server does (observed against the servers, or
read in their source), so that the client's modes, fallbacks and budget are tested against each:

- llama-cpp-python 0.3 (`--chat_format chatml-function-calling`): `json_schema` -> 500 with a pydantic
  body; tools ignored unless `tool_choice` is sent; assistant `content: null` -> 500 (pydantic too); `json_object`
  enforces its `schema` and without one gives free-form JSON; a schema whose grammar repeats too much (a
  string of more than 1,000 characters) is refused by llama.cpp's grammar parser, and the server then
  crashes (here: a 500); a prompt of `n_ctx` tokens or more -> 400 `context_length_exceeded`; no `/props`
  and no window in `/v1/models`; with `tool_choice: "auto"` its completions are made with `max_tokens=None`, so
  an answer runs past `max_tokens` (here: four times it, as SmolLM2 filling a tool call's free-text argument).
- vLLM: `json_schema` honoured; `tool_choice: "auto"` -> 400 without `--enable-auto-tool-choice`;
  prompt + max_tokens over `max_model_len` -> 400; `max_model_len` in `/v1/models`.
- Ollama's OpenAI endpoint: `json_object` only (a `json_schema` format is ignored); native tools;
  the context in `/api/show`.
- OpenAI: strict `json_schema`; unknown parameters refused; 429 with Retry-After when rate limited.

The responder stands for the model: it answers as a model that saw the schema would. Where a server
keeps the schema from the model (ignored, not in the prompt), the personality answers in prose instead.
"""

import dataclasses
import json
from collections.abc import Callable

from .llm_stub import Reply, Request

CHARS_PER_TOKEN = 3  # the prompt tokens these servers count for a request


def _error(status: int, message: str, **fields) -> Reply:
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None, **fields}}
    return Reply(status=status, raw_body=json.dumps(body))


def _validation_error(detail: str) -> Reply:
    """llama-cpp-python's answer to a request its pydantic models reject: a 500, not a 400."""
    return _error(
        500,
        f'1 validation error:\n  {detail}\n\n  File "llama_cpp/server/app.py", line 376, in create_chat_completion\n'
        "    POST /v1/chat/completions",
        type="internal_server_error",
    )


# The longest string llama.cpp's grammar parser takes: longer ones repeat a rule past its "sane defaults".
GRAMMAR_MAX_STRING = 1000


def longest_string(schema) -> int:
    """The largest maxLength anywhere in a schema."""
    if isinstance(schema, dict):
        own = schema.get("maxLength", 0) if isinstance(schema.get("maxLength"), int) else 0
        return max([own, *(longest_string(v) for v in schema.values())])
    if isinstance(schema, list):
        return max([0, *(longest_string(v) for v in schema)])
    return 0


def _schema_in_prompt(request: Request) -> bool:
    return any("JSON Schema" in (m.get("content") or "") for m in request.messages if m.get("role") == "system")


class Personality:
    name = "generic"
    enforces_json_schema = True  # response_format json_schema reaches the model (as a grammar or guided decoding)
    enforces_json_object_schema = False  # so does response_format {"type": "json_object", "schema": ...}

    def __init__(self, context_window: int = 8192):
        self.context_window = context_window

    def prompt_tokens(self, body: dict) -> int:
        text = json.dumps(body.get("messages", [])) + json.dumps(body.get("tools") or [])
        return len(text) // CHARS_PER_TOKEN

    def refusal(self, request: Request) -> Reply | None:
        """The error the server answers this request with, if any."""
        return None

    def shape(self, request: Request, responder: Callable[[Request], Reply]) -> Reply:
        """The model's answer as the server lets it through."""
        rf = request.body.get("response_format") or {}
        if not _schema_in_prompt(request):
            if rf.get("type") == "json_schema" and not self.enforces_json_schema:
                return Reply(content="Sure! The sky is blue and the weather is fine.")
            if rf.get("type") == "json_object" and not (self.enforces_json_object_schema and "schema" in rf):
                return Reply(content={"sky": "blue"})  # JSON, but not what the schema asks for
        return responder(request)

    def get(self, path: str, models: list[str]) -> dict | None:
        return None

    def post(self, path: str, body: dict) -> dict | None:
        return None


class LlamaCppPython(Personality):
    name = "llama-cpp-python"
    enforces_json_schema = False
    enforces_json_object_schema = True

    def refusal(self, request):
        tokens = self.prompt_tokens(request.body)
        if tokens >= self.context_window:
            max_tokens = request.body.get("max_tokens")
            return _error(
                400,
                f"This model's maximum context length is {self.context_window} tokens. However, you requested "
                f"{tokens + (max_tokens or 0)} tokens ({tokens} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
                param="messages",
                code="context_length_exceeded",
            )
        rf = request.body.get("response_format") or {}
        if longest_string(rf.get("schema")) > GRAMMAR_MAX_STRING:
            return _error(500, "failed to parse grammar", type="internal_server_error")
        rf_type = rf.get("type")
        if rf_type not in (None, "text", "json_object"):
            return _validation_error(
                "{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), 'msg': \"Input should be 'text' "
                f"or 'json_object'\", 'input': '{rf_type}', 'ctx': {{'expected': \"'text' or 'json_object'\"}}}}"
            )
        for index, message in enumerate(request.messages):
            if message.get("role") == "assistant" and message.get("content") is None:
                return _validation_error(
                    f"{{'type': 'string_type', 'loc': ('body', 'messages', {index}, "
                    "'ChatCompletionRequestAssistantMessage', 'content'), 'msg': 'Input should be a valid string', "
                    "'input': None}"
                )
        return None

    def shape(self, request, responder):
        body = request.body
        rf = body.get("response_format") or {}
        if rf.get("type") == "json_object" and "schema" not in rf:
            return Reply(content={})  # free-form JSON: the grammar allows any object
        if body.get("tools") and body.get("tool_choice") in (None, "none"):
            return Reply(content="I can help with that.")  # a missing tool_choice reads as "none"
        reply = super().shape(request, responder)
        if body.get("tools") and body.get("tool_choice") == "auto" and reply.status == 200:
            return dataclasses.replace(reply, completion_tokens=4 * (body.get("max_tokens") or 16))
        return reply

    def get(self, path, models):
        if path.rstrip("/").endswith("/models"):
            return {"object": "list", "data": [{"id": m, "object": "model", "owned_by": "me"} for m in models]}
        return None


class VLLM(Personality):
    name = "vllm"

    def __init__(self, context_window: int = 8192, auto_tool_choice: bool = False):
        super().__init__(context_window)
        self.auto_tool_choice = auto_tool_choice

    def refusal(self, request):
        tokens = self.prompt_tokens(request.body)
        max_tokens = request.body.get("max_tokens") or 0
        if tokens + max_tokens > self.context_window:
            return _error(
                400,
                f"This model's maximum context length is {self.context_window} tokens. However, you requested "
                f"{tokens + max_tokens} tokens ({tokens} in the messages, {max_tokens} in the completion). "
                "Please reduce the length of the messages or completion.",
            )
        if request.body.get("tool_choice") == "auto" and not self.auto_tool_choice:
            return _error(400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set')
        return None

    def get(self, path, models):
        if path.rstrip("/").endswith("/models"):
            listing = [{"id": m, "object": "model", "max_model_len": self.context_window} for m in models]
            return {"object": "list", "data": listing}
        return None


class Ollama(Personality):
    name = "ollama"
    enforces_json_schema = False

    def post(self, path, body):
        if path.rstrip("/").endswith("/api/show"):
            return {
                "model_info": {"general.architecture": "llama", "llama.context_length": 131072},
                "parameters": f"num_ctx {self.context_window}\nstop <|im_end|>",
            }
        return None


class OpenAI(Personality):
    name = "openai"

    def __init__(self, context_window: int = 128000, rate_limited: int = 0):
        super().__init__(context_window)
        self.rate_limited = rate_limited  # the next n requests get a 429

    def refusal(self, request):
        if self.rate_limited > 0:
            self.rate_limited -= 1
            reply = _error(429, "Rate limit reached for requests per min (RPM): Limit 3, Used 3, Requested 1.")
            reply.headers = {"retry-after": "1"}
            return reply
        rf = request.body.get("response_format") or {}
        if "schema" in rf:
            return _error(400, "Unknown parameter: 'response_format.schema'.", param="response_format.schema")
        tokens = self.prompt_tokens(request.body)
        if tokens > self.context_window:
            return _error(
                400,
                f"This model's maximum context length is {self.context_window} tokens. However, your messages "
                f"resulted in {tokens} tokens. Please reduce the length of the messages.",
                param="messages",
                code="context_length_exceeded",
            )
        return None


PERSONALITIES = {p.name: p for p in (LlamaCppPython, VLLM, Ollama, OpenAI)}
