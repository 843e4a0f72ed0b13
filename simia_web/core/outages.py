"""Outages of the servers the app stands on (PostgreSQL, Redis, the broker): told apart from errors of
its own, waited out by workers, answered with 503 and a retry hint by the web app.

An outage is an error about reaching a server, never about what was asked of it: a dropped or refused
connection, a server shutting down or not yet accepting connections, a full connection pool. PostgreSQL
errors the server reports about a statement (a statement timeout, "stack depth limit exceeded") are the
request's own and stay errors.
"""

import logging
import random
import sys
import time

import kombu.exceptions
import psycopg
import redis.exceptions
from django import db
from django.core.signals import got_request_exception
from django.http import HttpResponse, JsonResponse
from django.template.loader import render_to_string

from .errors import Unavailable

logger = logging.getLogger(__name__)

# Seconds a client is asked to wait before trying again (Retry-After).
RETRY_AFTER_SECONDS = 5
# SQLSTATE classes and codes of a server out of reach: connection exceptions (08), operator intervention
# (57P01 admin shutdown, 57P02 crash shutdown, 57P03 cannot connect now) and too many connections.
_PG_OUTAGE_STATES = ("08", "57P01", "57P02", "57P03", "53300")
_BROKER_OR_REDIS_OUTAGES = (
    kombu.exceptions.OperationalError,  # the broker out of reach when sending
    redis.exceptions.ConnectionError,  # refused, reset, closed; also "LOADING" after a restart
    redis.exceptions.TimeoutError,
    redis.exceptions.ReadOnlyError,  # a replica during a failover
    redis.exceptions.TryAgainError,
    redis.exceptions.ClusterDownError,
)
# Waits between tries while a server is out of reach (seconds, before jitter).
_FIRST_PAUSE, _LONGEST_PAUSE = 0.25, 5.0


def is_outage(exc: BaseException | None) -> bool:
    """Whether `exc`, or an exception it was raised from, says a server is out of reach."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if _is_outage_itself(exc):
            return True
        exc = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return False


def _is_outage_itself(exc: BaseException) -> bool:
    if isinstance(exc, _BROKER_OR_REDIS_OUTAGES):
        return True
    if isinstance(exc, psycopg.InterfaceError):  # "the connection is closed"
        return True
    if isinstance(exc, psycopg.OperationalError):
        # No SQLSTATE: the client lost or could not open the connection, or the pool had none to give.
        return exc.sqlstate is None or exc.sqlstate.startswith(_PG_OUTAGE_STATES)
    # Django's wrappers name the driver's error as their cause (judged above); one of Django's own, without
    # a cause, says the connection is closed.
    return isinstance(exc, db.InterfaceError) and exc.__cause__ is None


class OutagePauses:
    """The waits of one piece of work between tries while a server is out of reach: growing, with jitter,
    logged once when the outage starts and then once a minute."""

    def __init__(self, what: str):
        self.what = what
        self.tries = 0
        self.since = 0.0
        self._logged_at = 0.0

    def pause(self, exc: BaseException) -> None:
        now = time.monotonic()
        if self.tries == 0:
            self.since = now
        if self.tries == 0 or now - self._logged_at >= 60:
            logger.warning("%s waits for a server out of reach (%.0f s so far): %s", self.what, now - self.since, exc)
            self._logged_at = now
        delay = min(_LONGEST_PAUSE, _FIRST_PAUSE * 2 ** min(self.tries, 10))
        self.tries += 1
        time.sleep(delay * (0.5 + random.random() / 2))
        connections_reset()


def connections_reset() -> None:
    """Drop this thread's database connections that an error left unusable, so the next query opens a new one
    (as Django does between requests; a connection inside a transaction is its owner's to end)."""
    for connection in db.connections.all(initialized_only=True):
        if connection.in_atomic_block:
            continue
        try:
            connection.close_if_unusable_or_obsolete()
        except db.Error:  # closing a connection the server already dropped
            logger.debug("closing a dead database connection failed", exc_info=True)


def through_outages(action, *, what: str):
    """Call `action()` until it returns, waiting out outages between tries; other errors propagate."""
    pauses = OutagePauses(what)
    while True:
        try:
            return action()
        except Exception as exc:
            if not is_outage(exc):
                raise
            pauses.pause(exc)


# -- the web app: 503 and Retry-After instead of 500 ---------------------------------------------------


def outage_response(request):
    """503 with a Retry-After hint: JSON for the REST API, a page for the rest."""
    refusal = Unavailable(
        "The service is briefly unavailable (a server it needs is out of reach). Try again shortly.",
        retry_after=RETRY_AFTER_SECONDS,
    )
    if request.path.startswith("/api/"):
        response = JsonResponse(refusal.body(), status=refusal.status_code)
    else:
        response = _page_response()
    for name, value in refusal.headers().items():
        response[name] = value
    response["Cache-Control"] = "no-store"
    return response


def _page_response():
    # Rendered without the request: context processors would ask the database for the user.
    return HttpResponse(render_to_string("503.html", {"retry_after": RETRY_AFTER_SECONDS}), status=503)


class OutageMiddleware:
    """Answers 503 when a server the request needed was out of reach, wherever the error was raised.

    A view's error arrives through process_exception. One raised in another middleware (a session saved
    as the response goes out) has already become a 500 response when it gets here: the request was marked
    when Django reported the exception (got_request_exception), and the 500 is replaced.
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        if response.status_code == 500 and getattr(request, "simia_outage", False):
            return outage_response(request)
        return response

    def process_exception(self, request, exception):
        if is_outage(exception):
            logger.warning("%s %s: 503, a server is out of reach: %s", request.method, request.path, exception)
            return outage_response(request)
        return None


def _mark_outage(sender, request=None, **kwargs):
    if request is not None and is_outage(sys.exc_info()[1]):
        request.simia_outage = True


got_request_exception.connect(_mark_outage, dispatch_uid="simia-outage-mark")
