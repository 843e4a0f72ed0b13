"""Outages told apart from errors of the app's own; 503 with Retry-After instead of 500; dead connections
replaced. (The real thing, servers killed mid-job, is in tests/faults.)"""

import sqlite3

import kombu.exceptions
import psycopg
import psycopg.errors
import pytest
import redis
from django import db
from django.contrib.sessions.backends.db import SessionStore
from django.core.signals import got_request_exception
from django.http import HttpResponse
from django.test import Client, RequestFactory

from simia_web.core.db import db_connection_check, pool_connection_check
from simia_web.core.outages import RETRY_AFTER_SECONDS, OutageMiddleware, is_outage, through_outages


def _wrapped(driver_error: Exception, django_class=db.OperationalError) -> Exception:
    """The error as Django raises it: its own class, the driver's error as the cause."""
    try:
        try:
            raise driver_error
        except Exception as exc:
            raise django_class(str(exc)) from exc
    except Exception as wrapped:
        return wrapped


@pytest.mark.parametrize(
    "error",
    [
        psycopg.OperationalError("server closed the connection unexpectedly"),  # no SQLSTATE: the connection
        psycopg.errors.AdminShutdown(),  # 57P01: a fast shutdown ended the session
        psycopg.errors.CannotConnectNow(),  # 57P03: the server is starting
        psycopg.errors.ConnectionFailure(),  # 08006
        psycopg.errors.TooManyConnections(),  # 53300
        psycopg.InterfaceError("the connection is closed"),
        redis.ConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."),
        redis.BusyLoadingError("Redis is loading the dataset in memory"),
        redis.TimeoutError("Timeout reading from socket"),
        kombu.exceptions.OperationalError("[Errno 111] Connection refused"),
    ],
)
def test_errors_reaching_a_server_are_outages(error):
    assert is_outage(error)
    if isinstance(error, psycopg.Error):
        assert is_outage(_wrapped(error))


@pytest.mark.parametrize(
    "error",
    [
        _wrapped(psycopg.errors.QueryCanceled()),  # a statement timeout: the statement's own
        _wrapped(psycopg.errors.ProgramLimitExceeded("stack depth limit exceeded")),
        _wrapped(psycopg.errors.UniqueViolation(), db.IntegrityError),
        _wrapped(sqlite3.OperationalError("database is locked")),
        redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind of value"),
        ValueError("bad input"),
    ],
)
def test_errors_about_what_was_asked_are_not_outages(error):
    assert not is_outage(error)


def test_an_error_raised_from_an_outage_is_one():
    try:
        try:
            raise redis.ConnectionError("Connection refused")
        except redis.ConnectionError as exc:
            raise RuntimeError("could not take a lease") from exc
    except RuntimeError as error:
        assert is_outage(error)


def test_work_is_tried_again_through_an_outage_and_other_errors_propagate(db, monkeypatch):
    """Waiting out an outage resets the connections, which the test database allows (the `db` fixture)."""
    monkeypatch.setattr("simia_web.core.outages.time.sleep", lambda seconds: None)
    failures = [redis.ConnectionError("refused"), psycopg.errors.AdminShutdown()]

    def flaky():
        if failures:
            raise failures.pop(0)
        return "done"

    assert through_outages(flaky, what="a test") == "done"
    with pytest.raises(ValueError):
        through_outages(lambda: int("x"), what="a test")


@pytest.fixture
def database_down(monkeypatch):
    """Every session read fails as it does when PostgreSQL is restarting."""

    def load(self):
        raise _wrapped(psycopg.errors.AdminShutdown("terminating connection due to administrator command"))

    monkeypatch.setattr(SessionStore, "load", load)


def test_pages_and_rest_answer_503_with_retry_after_during_an_outage(users, database_down):
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "a-session"
    page = client.get("/jobs/")
    assert page.status_code == 503 and page["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert b"Briefly unavailable" in page.content
    api = client.get("/api/v1/jobs/")
    assert api.status_code == 503 and api["Retry-After"] == str(RETRY_AFTER_SECONDS)
    assert "try again" in api.json()["detail"].lower()


def test_an_error_of_the_apps_own_is_still_a_500(users, monkeypatch):
    def load(self):
        raise _wrapped(psycopg.errors.ProgramLimitExceeded("stack depth limit exceeded"))

    monkeypatch.setattr(SessionStore, "load", load)
    client = Client(raise_request_exception=False)
    client.cookies["sessionid"] = "a-session"
    assert client.get("/jobs/").status_code == 500


def test_an_outage_met_by_another_middleware_is_a_503_too():
    """A session saved as the response goes out fails after the view: Django has made a 500 of it already."""
    request = RequestFactory().get("/jobs/")

    def inner(request):
        try:
            raise _wrapped(psycopg.OperationalError("server closed the connection unexpectedly"))
        except db.OperationalError:
            got_request_exception.send(sender=None, request=request)
            return HttpResponse(status=500)

    response = OutageMiddleware(inner)(request)
    assert response.status_code == 503 and response["Retry-After"] == str(RETRY_AFTER_SECONDS)


def _database_url() -> str:
    settings = db.connection.settings_dict
    host, port = settings["HOST"] or "127.0.0.1", settings["PORT"] or 5432
    return f"postgres://{settings['USER'] or 'postgres'}@{host}:{port}/{settings['NAME']}"


def _terminate(pid: int) -> None:
    """End a server process as a restart does (from a connection of its own), and wait until it is gone."""
    with psycopg.connect(_database_url(), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", [pid])


@pytest.mark.django_db(transaction=True)
def test_a_connection_the_server_ended_is_replaced_before_its_next_query():
    if db.connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (make test sets it)")
    with db.connection.cursor() as cursor:
        cursor.execute("SELECT pg_backend_pid()")
        [pid] = cursor.fetchone()
    _terminate(pid)
    db_connection_check()
    with db.connection.cursor() as cursor:  # without the check: "terminating connection due to administrator command"
        cursor.execute("SELECT pg_backend_pid()")
        assert cursor.fetchone()[0] != pid


@pytest.mark.django_db(transaction=True)
def test_the_pools_check_refuses_a_connection_the_server_ended_and_takes_a_live_one_without_a_query():
    if db.connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL (make test sets it)")
    with psycopg.connect(_database_url(), autocommit=True) as conn:
        pool_connection_check(conn)  # live and idle: nothing to read on its socket
        _terminate(conn.info.backend_pid)
        with pytest.raises(psycopg.OperationalError):
            pool_connection_check(conn)
