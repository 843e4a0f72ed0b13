"""An OpenAI-compatible chat-completions server on loopback whose answers the tests script.

The real `openai` client talks to it over HTTP, so retries, timeouts, fallbacks and parsing are
exercised exactly as against a real endpoint. A responder answers each request; faults queued
with `inject` are served first (optionally only for one stage, read from the X-Simia-Stage header).
A `personality` (tests/support/personalities.py) makes it answer as a real server does: what it
refuses, ignores and reports.

With `slots` set it works as a local server with that many slots (llama.cpp, llama-cpp-python: one):
it works on at most `slots` completions at once, the others wait in arrival order, and each takes
`latency` plus `seconds_per_prompt_token` for every token of its prompt (its messages' characters / 4)
while it holds its slot. Like llama-cpp-python, it finishes a request whose client hung up (counted
in `abandoned`): the slot stays busy meanwhile. `slots` may change while it serves.
"""

import contextlib
import json
import select
import socket
import sys
import threading
import time
import uuid
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Reply:
    content: Any = None  # a dict/list is sent as JSON text
    tool_calls: list[dict] | None = None  # [{"name": ..., "arguments": {...} or "raw string"}]
    finish_reason: str = "stop"
    status: int = 200
    error_message: str = ""
    delay: float = 0.0
    raw_body: str | None = None  # send exactly this body (for broken responses)
    headers: dict = field(default_factory=dict)
    completion_tokens: int | None = None  # reported as given (an answer that ran past max_tokens), else counted


@dataclass
class Request:
    stage: str
    body: dict
    headers: dict = field(default_factory=dict)  # lower-cased names

    @property
    def messages(self) -> list[dict]:
        return self.body.get("messages", [])

    @property
    def schema_name(self) -> str | None:
        rf = self.body.get("response_format") or {}
        return (rf.get("json_schema") or {}).get("name")

    def user_payload(self) -> Any:
        """The JSON document in the last user message (the app sends its inputs that way)."""
        for message in reversed(self.messages):
            if message.get("role") == "user":
                try:
                    return json.loads(message.get("content") or "")
                except ValueError:
                    return None
        return None


class AnswerGate:
    """Answers the first `budget` requests, then holds the rest unanswered until `open()`.

    Shared by several servers, it makes a fault strike while requests are in flight however fast or
    slow the machine runs the job: the test waits until every worker thread is held, then strikes.
    """

    def __init__(self, budget: int):
        self._budget = budget
        self._open = False
        self._changed = threading.Condition()
        self.held = 0  # requests waiting now

    def pass_through(self) -> None:
        with self._changed:
            if self._open or self._budget > 0:
                self._budget -= 1
                return
            self.held += 1
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._open)
            self.held -= 1

    def wait_held(self, count: int, *, timeout: float) -> bool:
        with self._changed:
            return self._changed.wait_for(lambda: self.held >= count, timeout=timeout)

    def open(self) -> None:
        with self._changed:
            self._open = True
            self._changed.notify_all()


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    # The listen backlog, read when the socket starts listening (in the constructor): hundreds of workers'
    # threads may connect at once, and the default of 5 refuses the rest.
    request_queue_size = 1024

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], ConnectionError):  # a client that gave up and hung up: nothing to say
            super().handle_error(request, client_address)


class StubLLM:
    def __init__(self, responder: Callable[[Request], Reply] | None = None, latency: float = 0.0):
        self.responder = responder or (lambda request: Reply(content={}))
        self.latency = latency
        self.lookup_latency = 0.0  # for GET requests (model listings, /props): a slow server's lookups
        self.requests: list[Request] = []
        self.reject_json_schema = False
        self.reject_json_object = False
        self.reject_tools = False
        self.models = ["stub-model"]  # listed by GET /v1/models
        self.personality = None  # a personalities.Personality: behave like that real server
        self.gate: AnswerGate | None = None
        self._faults: deque[tuple[str | None, Reply]] = deque()
        self._lock = threading.Lock()
        self._in_flight = 0
        self.max_in_flight = 0
        # One-slot (or n-slot) mode, see the module's notes.
        self.slots: int | None = None
        self.seconds_per_prompt_token = 0.0
        self.abandoned = 0  # answers finished after their client hung up
        self.worked_most = 0  # the most completions worked on at once (slot mode)
        self._working = 0
        self._slot_turns: deque[object] = deque()  # waiting for a slot, first come first served
        self._slot_changed = threading.Condition(self._lock)
        stub = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # An answer goes out in one write, headers and body together, as servers commonly send small
            # responses: the client then reads it with one recv, not one for the headers and one for the body.
            wbufsize = -1
            # Without this, Nagle's algorithm and the client's delayed ACK can hold a segment back ~40 ms.
            disable_nagle_algorithm = True

            def log_message(self, *args):
                pass

            def do_GET(self):
                if self.path.rstrip("/").endswith("/in-flight"):  # the most answered at once since the last look
                    return self._send(Reply(raw_body=json.dumps({"max_in_flight": stub.take_max_in_flight()})))
                time.sleep(stub.lookup_latency)
                if stub.personality is not None:
                    document = stub.personality.get(self.path, stub.models)
                    if document is not None:
                        return self._send(Reply(raw_body=json.dumps(document)))
                if self.path.rstrip("/").endswith("/models"):
                    listing = [{"id": name, "object": "model", "owned_by": "stub"} for name in stub.models]
                    self._send(Reply(raw_body=json.dumps({"object": "list", "data": listing})))
                else:
                    self._send(Reply(status=404, error_message=f"no route {self.path}"))

            def do_POST(self):
                received = time.monotonic()
                length = int(self.headers.get("content-length", 0))
                body = json.loads(self.rfile.read(length) or b"{}")
                if not self.path.rstrip("/").endswith("/chat/completions"):
                    document = stub.personality.post(self.path, body) if stub.personality is not None else None
                    if document is None:
                        return self._send(Reply(status=404, error_message=f"no route {self.path}"))
                    return self._send(Reply(raw_body=json.dumps(document)))
                headers = {k.lower(): v for k, v in self.headers.items()}
                request = Request(stage=headers.get("x-simia-stage", ""), body=body, headers=headers)
                stub._enter()
                try:
                    reply = stub._reply_for(request)
                    payload = _payload(reply, body, stub.personality)
                    stub._wait_for_gate()
                    stub._work(reply, body, received, self.connection)
                    self._send(reply, payload)
                finally:
                    stub._leave()

            def _send(self, reply: Reply, payload: bytes | None = None):
                if payload is None:
                    payload = _payload(reply, {})
                self.send_response(reply.status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                for key, value in reply.headers.items():
                    self.send_header(key, value)
                self.end_headers()
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):  # the client hung up
                    self.wfile.write(payload)

        self.server = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def start(self) -> "StubLLM":
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def inject(self, *replies: Reply, stage: str | None = None) -> None:
        """Serve these replies (in order) before the responder, to requests of `stage` (or any)."""
        with self._lock:
            self._faults.extend((stage, r) for r in replies)

    def stage_requests(self, stage: str) -> list[Request]:
        return [r for r in self.requests if r.stage == stage]

    @property
    def in_flight(self) -> int:
        """Requests being answered now (this one included, when a responder asks)."""
        return self._in_flight

    def take_max_in_flight(self) -> int:
        """The most requests answered at once since the last call (then counting starts again)."""
        with self._lock:
            most, self.max_in_flight = self.max_in_flight, self._in_flight
        return most

    def set_slots(self, slots: int | None) -> None:
        """Serve with this many slots from now on (None: as many as ask)."""
        with self._slot_changed:
            self.slots = slots
            self._slot_changed.notify_all()

    def _work(self, reply: Reply, body: dict, received: float, connection: socket.socket) -> None:
        if self.slots is None:
            # Latency counts from arrival, so the server's own work does not add to it.
            time.sleep(max(0.0, received + self.latency + reply.delay - time.monotonic()))
            return
        self._work_in_a_slot(reply, body)
        if _hung_up(connection):
            with self._lock:
                self.abandoned += 1

    def _work_in_a_slot(self, reply: Reply, body: dict) -> None:
        """Wait for a slot in arrival order, then hold it for the request's work."""
        turn = object()
        with self._slot_changed:
            self._slot_turns.append(turn)
            self._slot_changed.wait_for(
                lambda: self._slot_turns[0] is turn and self._working < (self.slots or len(self._slot_turns))
            )
            self._slot_turns.popleft()
            self._working += 1
            self.worked_most = max(self.worked_most, self._working)
            self._slot_changed.notify_all()
        try:
            tokens = len(json.dumps(body.get("messages") or [])) / 4
            time.sleep(self.latency + reply.delay + self.seconds_per_prompt_token * tokens)
        finally:
            with self._slot_changed:
                self._working -= 1
                self._slot_changed.notify_all()

    def take_worked_most(self) -> int:
        """The most completions worked on at once since the last call (slot mode)."""
        with self._lock:
            most, self.worked_most = self.worked_most, self._working
        return most

    def _wait_for_gate(self):
        if self.gate is not None:
            self.gate.pass_through()

    def _enter(self):
        with self._lock:
            self._in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self._in_flight)

    def _leave(self):
        with self._lock:
            self._in_flight -= 1

    def _reply_for(self, request: Request) -> Reply:
        with self._lock:
            self.requests.append(request)
            rf_type = (request.body.get("response_format") or {}).get("type")
            if self.reject_json_schema and rf_type == "json_schema":
                return Reply(status=400, error_message="response_format json_schema is not supported by this server")
            if self.reject_json_object and rf_type == "json_object":
                return Reply(status=400, error_message="response_format json_object is not supported by this server")
            if self.reject_tools and request.body.get("tools"):
                return Reply(status=400, error_message="tools are not supported by this model")
            for i, (stage, reply) in enumerate(self._faults):
                if stage is None or stage == request.stage:
                    del self._faults[i]
                    return reply
        personality = self.personality
        if personality is None:
            return self.responder(request)
        return personality.refusal(request) or personality.shape(request, self.responder)


def _hung_up(connection: socket.socket) -> bool:
    """Whether the client closed its end while its request was being worked on."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


def closed_port_url() -> str:
    """A loopback URL where nothing listens: requests to it are refused."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def _completion(reply: Reply, model: str, prompt_tokens: int = 100) -> dict:
    content = reply.content
    if content is not None and not isinstance(content, str):
        content = json.dumps(content)
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {
                "id": f"call_{uuid.uuid4().hex[:10]}",
                "type": "function",
                "function": {
                    "name": call["name"],
                    "arguments": call["arguments"]
                    if isinstance(call["arguments"], str)
                    else json.dumps(call["arguments"]),
                },
            }
            for call in reply.tool_calls
        ]
    arguments = "".join(call["function"]["arguments"] for call in message.get("tool_calls") or [])
    completion_tokens = reply.completion_tokens or max(1, len(content or "") // 4 + len(arguments) // 4)
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reply.finish_reason}],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        },
    }


def _payload(reply: Reply, body: dict, personality=None) -> bytes:
    if reply.raw_body is not None:
        return reply.raw_body.encode()
    if reply.status != 200:
        error = {"message": reply.error_message or "stub error", "type": "invalid_request_error"}
        return json.dumps({"error": error}).encode()
    prompt_tokens = personality.prompt_tokens(body) if personality is not None else 100
    return json.dumps(_completion(reply, body.get("model", "stub"), prompt_tokens)).encode()


def serve_pipeline_script(latency: float) -> None:
    """Serve the scripted domain-first pipeline in this process (benchmarks run it apart from the app)."""
    import os

    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")
    django.setup()  # the script's API answer is read by the app's own synthesis code

    from .scripts import pipeline_responder

    serve(StubLLM(responder=pipeline_responder(), latency=latency))


def serve(stub: StubLLM) -> None:
    """Serve until the process is stopped, its URL printed first (benchmarks run it apart from the app)."""
    stub.start()
    print(stub.url, flush=True)
    stub.thread.join()


if __name__ == "__main__":
    serve_pipeline_script(float(sys.argv[1]) if len(sys.argv) > 1 else 0.0)
