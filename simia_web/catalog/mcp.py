"""MCP servers as the catalog reaches them, through the official `mcp` SDK: a command run over stdio, or a
streamable-HTTP URL.

The SDK is asynchronous and the app is not: a session runs on an event loop of its own (anyio's blocking
portal), so a worker thread uses it like any other client. The SDK is imported when a session opens, not with
this module: importing it takes seconds, which no web process should pay at start.

A command is run without a shell, in a temporary directory of its own (also its TMPDIR), with only the SDK's
safe environment (PATH, HOME, ...): never the app's secrets. Running one is running code on the machine, so
only site administrators (and the operator, from the command line) may name one. A URL must pass the checks endpoint
profiles pass (no credentials in it, no link-local or cloud metadata address), when it is named and again
when a session opens.
"""

import shlex
import tempfile
from contextlib import ExitStack, asynccontextmanager, suppress
from dataclasses import asdict, dataclass
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import urlsplit

from django.conf import settings

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal
from django.core.exceptions import PermissionDenied

from simia_web.core.json_input import json_parse
from simia_web.llm.validation import url_address_problem, url_credentials

MAX_COMMAND = 2000
MAX_URL = 2000
STDERR_SHOWN = 600  # characters of a failed server's stderr quoted in the error


@dataclass(frozen=True)
class McpServer:
    """Where an MCP server is: exactly one of a command line (stdio) and a URL (streamable HTTP)."""

    command: str = ""
    url: str = ""

    def describe(self) -> str:
        return f"command {self.command!r}" if self.command else f"URL {self.url}"

    def as_dict(self) -> dict:
        return asdict(self)


class McpUnavailable(Exception):
    """The server could not be started or reached, timed out, or broke the protocol."""


class McpRefused(McpUnavailable):
    """The server answered a request with a protocol error (an unknown tool, invalid arguments): the session
    itself is still usable."""


@dataclass(frozen=True)
class ToolAnswer:
    """What a tool answered: its text (JSON text read as the value it holds), or its structured content when
    it sent no text; `is_error` when the tool reported a failure (an answer all the same)."""

    value: Any
    is_error: bool


def mcp_server_problems(server: McpServer) -> dict[str, str]:
    """Why the server cannot be used, by field ("command", "url", or "server" for both or neither)."""
    if bool(server.command) == bool(server.url):
        return {"server": "name either a command or a URL"}
    if server.command:
        if len(server.command) > MAX_COMMAND:
            return {"command": f"at most {MAX_COMMAND} characters"}
        try:
            argv = shlex.split(server.command)
        except ValueError as exc:
            return {"command": f"cannot be read as a command line: {exc}"}
        return {} if argv else {"command": "is empty"}
    parts = urlsplit(server.url)
    if len(server.url) > MAX_URL:
        return {"url": f"at most {MAX_URL} characters"}
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return {"url": "must be an http:// or https:// URL with a host"}
    if credentials := url_credentials(server.url):
        return {"url": f"must not contain credentials ({', '.join(credentials)})"}
    if address := url_address_problem(server.url):
        return {"url": f"must not point at {address} (SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS allows it)"}
    return {}


def mcp_command_check(server: McpServer, actor) -> None:
    """Running a server's command runs code on our machines, whichever workspace asks: only a site administrator
    (or the operator at the command line, who acts as no user) may name one; a workspace's admins may not. Raises
    PermissionDenied."""
    if (
        server.command
        and actor is not None
        and not (actor.is_authenticated and actor.is_active and actor.is_site_admin)
    ):
        raise PermissionDenied("Naming an MCP server's command needs a site administrator (a URL does not).")


def failure_reason(exc: BaseException) -> str:
    """A one-line reason: the first real error inside the task groups the SDK raises them from."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = str(exc).strip() or "no detail"
    return f"{type(exc).__name__}: {text}"[:500]


@asynccontextmanager
async def _client(server: McpServer, *, timeout: float, workdir: str | None, errlog):
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    if server.command:
        argv = shlex.split(server.command)
        assert workdir is not None  # McpSession makes one for every server it starts
        parameters = StdioServerParameters(command=argv[0], args=argv[1:], cwd=workdir, env={"TMPDIR": workdir})
        transport = stdio_client(parameters, errlog=errlog)
    else:
        transport = streamable_http_client(server.url)
    # No response cache: a reference is asked the same question twice on purpose (in another session).
    async with Client(transport, read_timeout_seconds=timeout, cache=None) as client:
        yield client


class McpSession:
    """One session with a server, used as a context manager: a new process for a command, a new HTTP session
    for a URL. Everything that goes wrong talking to it is an McpUnavailable with the reason."""

    def __init__(self, server: McpServer, *, timeout: float | None = None):
        self.server = server
        self.timeout = timeout or settings.SIMIA_MCP_TIMEOUT_SECONDS
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._client: Any = None  # the mcp Client, once connected
        self._errlog: IO[str] | None = None

    def __enter__(self) -> "McpSession":
        from anyio.from_thread import start_blocking_portal

        if problems := mcp_server_problems(self.server):
            raise McpUnavailable("; ".join(f"{field}: {message}" for field, message in problems.items()))
        stack = self._stack
        try:
            workdir = None
            if self.server.command:
                workdir = stack.enter_context(tempfile.TemporaryDirectory(prefix="simia-mcp-"))
            self._errlog = stack.enter_context(tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace"))
            self._portal = portal = stack.enter_context(start_blocking_portal())
            connected = _client(self.server, timeout=self.timeout, workdir=workdir, errlog=self._errlog)
            self._client = stack.enter_context(portal.wrap_async_context_manager(connected))
        except Exception as exc:
            reason = self._reason(exc)
            stack.close()
            raise McpUnavailable(f"cannot start a session: {reason}") from exc
        return self

    def __exit__(self, *exc_info) -> None:
        with suppress(Exception):  # closing a session that already broke: its error has been reported
            self._stack.close()

    def _reason(self, exc: BaseException) -> str:
        reason = failure_reason(exc)
        if self._errlog is not None:
            self._errlog.seek(0)
            stderr = self._errlog.read()[-STDERR_SHOWN:].strip()
            if stderr:
                reason += f" (the server's stderr ends: {stderr})"
        return reason

    def _run(self, function, *args):
        from mcp import MCPError

        if self._portal is None:
            raise McpUnavailable("the session is not open")
        try:
            return self._portal.call(function, *args)
        except MCPError as exc:
            raise McpRefused(failure_reason(exc)) from exc
        except Exception as exc:
            raise McpUnavailable(self._reason(exc)) from exc

    def tools(self) -> list[dict]:
        """Every tool the server lists (all pages), as the JSON the protocol carries."""
        tools, cursor = [], None
        while True:
            page = self._run(lambda cursor=cursor: self._client.list_tools(cursor=cursor))
            tools += [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in page.tools]
            cursor = page.next_cursor
            if not cursor:
                return tools

    def call(self, name: str, arguments: dict) -> ToolAnswer:
        result = self._run(lambda: self._client.call_tool(name, arguments))
        return ToolAnswer(value=_answer_value(result), is_error=bool(result.is_error))


def _answer_value(result) -> Any:
    texts = [block.text for block in result.content if getattr(block, "type", "") == "text"]
    if texts:
        text = "\n".join(texts)
        try:
            return json_parse(text, where="the tool's answer", strict=False)
        except ValueError:
            return text
    if result.structured_content is not None:
        return result.structured_content
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content]
