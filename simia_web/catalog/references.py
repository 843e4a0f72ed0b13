"""A domain's reference environment: naming it, and sessions with it.

A session is fresh each time (a new server process for a command, a new HTTP session for a URL, then the
reset tool when one is named), so each trajectory replayed or rolled out against it starts from the
server's initial state. Calls are made by API name: the server's tool of that name, or whose name becomes it
in snake_case (as an MCP import names its APIs)."""

from dataclasses import asdict, dataclass
from typing import Any

import jsonpointer
from django.db import transaction

from simia_web.core.errors import ValidationFailed
from simia_web.core.services import audit_record

from .importers.names import snake_name
from .mcp import McpRefused, McpServer, McpSession, McpUnavailable, mcp_command_check, mcp_server_problems
from .models import Domain, DomainReference


@dataclass(frozen=True)
class ReferenceConfig:
    command: str = ""
    url: str = ""
    reset_tool: str = ""
    response_pointer: str = ""

    @property
    def server(self) -> McpServer:
        return McpServer(command=self.command, url=self.url)

    def describe(self) -> str:
        return self.server.describe()

    def as_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def of(cls, reference: DomainReference) -> "ReferenceConfig":
        return cls(
            command=reference.command,
            url=reference.url,
            reset_tool=reference.reset_tool,
            response_pointer=reference.response_pointer,
        )


def reference_for(domain: Domain) -> ReferenceConfig | None:
    reference = DomainReference.objects.filter(domain=domain).first()
    return ReferenceConfig.of(reference) if reference is not None else None


def reference_problems(config: ReferenceConfig) -> dict[str, str]:
    problems = mcp_server_problems(config.server)
    if config.response_pointer:
        try:
            jsonpointer.JsonPointer(config.response_pointer)
        except jsonpointer.JsonPointerException as exc:
            problems["response_pointer"] = f"not a JSON Pointer: {exc}"
    if len(config.reset_tool) > 120:
        problems["reset_tool"] = "at most 120 characters"
    return problems


@transaction.atomic
def reference_set(*, domain: Domain, config: ReferenceConfig, actor=None) -> DomainReference:
    """Name (or change) the domain's reference. ValidationFailed by field; PermissionDenied for a command
    named by someone who is not an admin."""
    mcp_command_check(config.server, actor)
    if problems := reference_problems(config):
        raise ValidationFailed.of(problems)
    author = actor if getattr(actor, "pk", None) else None
    reference, _ = DomainReference.objects.update_or_create(
        domain=domain, defaults={**config.as_dict(), "updated_by": author}
    )
    audit_record(actor=actor, action="domain.reference_set", target=domain, data=config.as_dict())
    return reference


@transaction.atomic
def reference_clear(*, domain: Domain, actor=None) -> bool:
    deleted, _ = DomainReference.objects.filter(domain=domain).delete()
    if deleted:
        audit_record(actor=actor, action="domain.reference_clear", target=domain, data={})
    return bool(deleted)


@dataclass(frozen=True)
class ReferenceAnswer:
    """The reference's answer to one call: its response (`is_error` when the API reported a failure), or
    `error` when the reference could not answer at all (no such tool, a broken session, a timeout)."""

    value: Any = None
    is_error: bool = False
    error: str = ""


class ReferenceSession:
    """A fresh session with a reference, as a context manager; McpUnavailable when it cannot be opened."""

    def __init__(self, config: ReferenceConfig):
        self.config = config
        self._session = McpSession(config.server)
        self._tools: dict[str, str] = {}
        self.broken = ""  # why the session can no longer be used, once a call broke it

    def __enter__(self) -> "ReferenceSession":
        session = self._session.__enter__()
        try:
            names = [tool["name"] for tool in session.tools()]
            self._tools = {snake_name(name): name for name in names} | {name: name for name in names}
            if self.config.reset_tool:
                if self.config.reset_tool not in names:
                    raise McpUnavailable(f"the server has no reset tool named {self.config.reset_tool!r}")
                if session.call(self.config.reset_tool, {}).is_error:
                    raise McpUnavailable(f"the reset tool {self.config.reset_tool!r} reported an error")
        except McpUnavailable:
            self._session.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc_info) -> None:
        self._session.__exit__(*exc_info)

    def call(self, api_name: str, arguments: dict) -> ReferenceAnswer:
        if self.broken:
            return ReferenceAnswer(error=f"not asked: {self.broken}")
        tool = self._tools.get(api_name)
        if tool is None:
            return ReferenceAnswer(error=f"the reference has no tool {api_name!r}")
        try:
            answer = self._session.call(tool, arguments)
        except McpRefused as exc:
            return ReferenceAnswer(error=f"the reference refused the call: {exc}")
        except McpUnavailable as exc:
            self.broken = f"an earlier call broke the session ({exc})"
            return ReferenceAnswer(error=str(exc))
        value = answer.value
        if self.config.response_pointer:
            missing = object()
            value = jsonpointer.resolve_pointer(value, self.config.response_pointer, missing)
            if value is missing:
                return ReferenceAnswer(error=f"the answer has nothing at {self.config.response_pointer}")
        return ReferenceAnswer(value=value, is_error=answer.is_error)
