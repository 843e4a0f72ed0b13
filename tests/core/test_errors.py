"""The one family of refusals and the one place that answers them: each error's status, body and headers over
REST, the same refusal as plain text on a page, and the outage answer built from it."""

import pytest
from django.conf import settings
from django.core.exceptions import ValidationError
from django.test import RequestFactory

from simia_web.catalog.importers import ImportIssue, ImportRejected
from simia_web.catalog.models import Domain
from simia_web.core.errors import (
    ApplicationError,
    Conflict,
    HeldByOther,
    NotFound,
    TooManyRequests,
    Unavailable,
    UpstreamFailed,
    ValidationFailed,
    VersionConflict,
)
from simia_web.core.filters import QueryTooLong
from simia_web.core.json_input import JsonRefused
from simia_web.core.middleware import RefusalMiddleware
from simia_web.core.outages import outage_response
from simia_web.core.rest import exception_handler
from simia_web.curation.services import ReviewError
from simia_web.environments.services import (
    EnvError,
    EnvFinished,
    EnvInputError,
    EnvNotFound,
    EnvSessionLimit,
    EnvUpstreamError,
)
from simia_web.formats import FormatError

ISSUE = ImportIssue("seeds.jsonl", 3, "messages", "is empty", 2)
ANSWERS = [
    (ApplicationError("No."), 400, {"detail": "No."}),
    (ValidationFailed("is wrong", field="name"), 400, {"name": ["is wrong"]}),
    (NotFound("No such file."), 404, {"detail": "No such file."}),
    (Conflict("Not built yet."), 409, {"detail": "Not built yet."}),
    (TooManyRequests("Slow down."), 429, {"detail": "Slow down."}),
    (UpstreamFailed("The endpoint failed."), 502, {"detail": "The endpoint failed."}),
    (
        HeldByOther("ann is reviewing trajectory 4 right now.", version=3),
        409,
        {"detail": "ann is reviewing trajectory 4 right now.", "code": "held", "version": 3, "changes": []},
    ),
    (ReviewError("A rejection needs a reason.", field="reason"), 400, {"reason": ["A rejection needs a reason."]}),
    (FormatError("messages[2].role", "must be one of system"), 400, {"messages[2].role": ["must be one of system"]}),
    (FormatError("", "must be a list of messages"), 400, {"messages": ["must be a list of messages"]}),
    (JsonRefused("body", "nested deeper than 64", path="a.b"), 400, {"a.b": ["nested deeper than 64"]}),
    (JsonRefused("", "not JSON"), 400, {"body": ["not JSON"]}),
    (QueryTooLong({"q": "at most 500 characters", "domain": "at most 500 characters"}), 400, None),
    (
        EnvError("task 3 is rejected, not valid"),
        400,
        {"error": "invalid_request", "detail": "task 3 is rejected, not valid"},
    ),
    (EnvInputError("no content"), 400, {"error": "invalid_message", "detail": "no content"}),
    (EnvNotFound("no environment session 9"), 404, {"error": "not_found", "detail": "no environment session 9"}),
    (EnvFinished("the episode ended"), 409, {"error": "episode_finished", "detail": "the episode ended"}),
    (EnvSessionLimit("10 sessions running"), 429, {"error": "session_limit", "detail": "10 sessions running"}),
    (
        EnvUpstreamError("the user simulator failed"),
        502,
        {"error": "user_simulator_failed", "detail": "the user simulator failed"},
    ),
    (
        ImportRejected([ISSUE]),
        400,
        {
            "detail": "Import refused: 1 problem; nothing was written.\n"
            "  - seeds.jsonl, line 3 (record 2): messages: is empty",
            "total": 1,
            "errors": [ISSUE.as_dict()],
        },
    ),
]


def test_the_api_has_one_exception_handler():
    assert settings.REST_FRAMEWORK["EXCEPTION_HANDLER"] == "simia_web.core.rest.exception_handler"


@pytest.mark.parametrize(("error", "status", "body"), ANSWERS, ids=lambda value: type(value).__name__)
def test_each_refusal_is_answered_with_its_status_and_body(error, status, body):
    response = exception_handler(error, {})
    assert response.status_code == status == error.status_code
    if body is None:  # a refusal naming several parameters names each
        body = {"q": ["at most 500 characters"], "domain": ["at most 500 characters"]}
    assert response.data == body


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        (EnvNotFound("x"), NotFound),
        (EnvFinished("x"), Conflict),
        (EnvSessionLimit("x"), TooManyRequests),
        (EnvUpstreamError("x"), UpstreamFailed),
        (HeldByOther("x", version=1), Conflict),
        (ReviewError("x"), ValidationFailed),
        (FormatError("f", "x"), ValueError),
        (JsonRefused("body", "x"), ValueError),
        (QueryTooLong({"q": "x"}), ValidationFailed),
    ],
)
def test_a_refusal_is_also_the_kind_of_refusal_it_answers_as(error, kind):
    assert isinstance(error, kind) and isinstance(error, ApplicationError)


@pytest.mark.django_db
def test_a_stale_version_names_the_version_now():
    domain = Domain.objects.create(name="shop", version=4)
    response = exception_handler(VersionConflict(domain, 2), {})
    assert response.status_code == 409
    assert response.data == {
        "detail": f"domain {domain.pk} was changed by someone else (you edited version 2, it is now version 4).",
        "code": "stale_version",
        "version": 4,
    }


def test_unavailable_says_when_to_try_again():
    response = exception_handler(Unavailable("Try again shortly.", retry_after=5), {})
    assert (response.status_code, response.data, response["Retry-After"]) == (
        503,
        {"detail": "Try again shortly."},
        "5",
    )


@pytest.mark.parametrize("path", ["/api/v1/trajectories/", "/review/"])
def test_an_outage_is_answered_as_unavailable(path):
    response = outage_response(RequestFactory().get(path))
    assert response.status_code == 503 and response["Retry-After"] == "5"


def test_a_refusal_naming_several_fields_names_each():
    refused = ValidationFailed.of({"format": "Unknown.", "filters.status": ["Unknown status.", "Choose one."]})
    response = exception_handler(refused, {})
    assert response.status_code == 400
    assert response.data == {"format": ["Unknown."], "filters.status": ["Unknown status.", "Choose one."]}
    assert refused.detail == "format: Unknown.; filters.status: Unknown status. Choose one."


def test_djangos_own_validation_error_that_escapes_a_view_names_its_fields():
    assert exception_handler(ValidationError({"format": ["Unknown."]}), {}).data == {"format": ["Unknown."]}
    assert exception_handler(ValidationError("Too many units."), {}).data == {"detail": ["Too many units."]}


@pytest.mark.parametrize(
    ("error", "status", "text"),
    [
        (QueryTooLong({"q": "at most 500 characters"}), 400, "Refused: q: at most 500 characters\n"),
        (HeldByOther("ann is reviewing it.", version=2), 409, "Refused: ann is reviewing it.\n"),
        (EnvNotFound("no environment session 9"), 404, "Refused: no environment session 9\n"),
    ],
)
def test_a_page_answers_a_refusal_it_does_not_explain_in_plain_text(error, status, text):
    response = RefusalMiddleware(lambda request: None).process_exception(RequestFactory().get("/x/"), error)
    assert (response.status_code, response.content.decode()) == (status, text)
