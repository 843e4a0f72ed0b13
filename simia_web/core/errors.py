"""The refusals a service, selector or the input gate raises for a request it cannot carry out.

Each names its HTTP status, a short `code` and a human `detail`; `body()` is the JSON answer and `headers()` any
header it needs (Retry-After). The REST API turns every one into its answer in one place
(`simia_web.core.rest.exception_handler`); pages catch the ones they explain on the page, and answer the rest as
a plain-text refusal with the same status (`simia_web.core.middleware.RefusalMiddleware`).

Services, selectors and the rule modules they call raise only these, never Django's or DRF's ValidationError
(`tests/core/test_error_family.py` holds them to it); `django_validation` turns Django's own validation run inside a
service (a model's `full_clean`, a field's validators, the password validators) into a ValidationFailed.
"""

from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self

from django.core.exceptions import ValidationError as DjangoValidationError


class ApplicationError(Exception):
    status_code = 400
    code = "invalid"

    def __init__(self, detail: str):
        self.detail = detail
        super().__init__(detail)

    def body(self) -> dict[str, Any]:
        return {"detail": self.detail}

    def headers(self) -> dict[str, str]:
        return {}


class ValidationFailed(ApplicationError):
    """An input that is wrong, answered `{field: [message]}` as the API answers a serializer's errors.

    `ValidationFailed.of({field: message or messages, ...})` refuses several fields at once. `errors` holds each
    field's messages (the field `detail` is about no field in particular), `messages` all of them in order."""

    code = "invalid"

    def __init__(self, detail: str, field: str = "detail"):
        super().__init__(detail)
        self.field = field
        self.errors: dict[str, list[str]] = {field: [detail]}

    @classmethod
    def of(cls, errors: Mapping[str, str | Iterable[Any]]) -> Self:
        """One refusal naming each field with its messages; its `detail` says them all, "field: message; ..."."""
        named = {
            name: [messages] if isinstance(messages, str) else [str(message) for message in messages]
            for name, messages in errors.items()
        }
        refusal = cls(fields_said(named), field=next(iter(named), "detail"))
        refusal.errors = named
        return refusal

    @property
    def messages(self) -> list[str]:
        return [message for messages in self.errors.values() for message in messages]

    def body(self) -> dict[str, Any]:
        return {name: list(messages) for name, messages in self.errors.items()}


def fields_said(errors: Mapping[str, list[str]], *, between: str = " ") -> str:
    """Each field's messages on one line: "name: message message; other: message"."""
    return "; ".join(f"{name}: {between.join(messages)}" for name, messages in errors.items())


@contextmanager
def django_validation(*, field: str = "detail") -> Iterator[None]:
    """Django's own validation run inside (a model's `full_clean`, a field's validators, the password validators)
    refused as a ValidationFailed: per field as Django names them, else under `field`."""
    try:
        yield
    except DjangoValidationError as exc:
        raise ValidationFailed.of(exc.message_dict if hasattr(exc, "error_dict") else {field: exc.messages}) from None


class NotFound(ApplicationError):
    status_code = 404
    code = "not_found"


class Forbidden(ApplicationError):
    """The caller may see the thing but their role does not allow this."""

    status_code = 403
    code = "forbidden"


class Conflict(ApplicationError):
    """The request is fine but the thing it acts on is not in a state that allows it."""

    status_code = 409
    code = "conflict"


class VersionConflict(Conflict):
    """A write based on a version of `obj` that someone else has since replaced: nothing was written."""

    code = "stale_version"

    def __init__(self, obj, expected: int):
        self.obj = obj
        self.expected = expected
        super().__init__(
            f"{obj._meta.verbose_name} {obj.pk} was changed by someone else "
            f"(you edited version {expected}, it is now version {obj.version})."
        )

    def body(self) -> dict[str, Any]:
        return {"detail": str(self), "code": self.code, "version": self.obj.version}


class HeldByOther(Conflict):
    """Someone else holds the item (they are working on it): nothing lands on it until they let it go.

    `version` is the item's version now; nothing changed it, which is what `changes` says."""

    code = "held"

    def __init__(self, detail: str, *, version: int):
        super().__init__(detail)
        self.version = version

    def body(self) -> dict[str, Any]:
        return {"detail": self.detail, "code": self.code, "version": self.version, "changes": []}


class TooManyRequests(ApplicationError):
    status_code = 429
    code = "too_many_requests"


class UpstreamFailed(ApplicationError):
    """A server the request depends on (an LLM endpoint) failed to answer it."""

    status_code = 502
    code = "upstream_failed"


class Unavailable(ApplicationError):
    """A server the app needs is out of reach for a moment: the client is told when to try again."""

    status_code = 503
    code = "unavailable"

    def __init__(self, detail: str, *, retry_after: int):
        super().__init__(detail)
        self.retry_after = retry_after

    def headers(self) -> dict[str, str]:
        return {"Retry-After": str(self.retry_after)}
