"""What the web benchmarks share (bench/review_pages.py, bench/web_load.py): a database made when missing, a
signed-in curator's session cookie, and gunicorn started as the deployment starts it."""

import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def database_ensure(url: str) -> None:
    import psycopg

    server, name = url.rsplit("/", 1)
    with psycopg.connect(f"{server}/postgres", autocommit=True) as connection:
        if not connection.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            connection.execute(f'CREATE DATABASE "{name}"')


def curator_session(user) -> str:
    """A signed-in session of `user` (its cookie value), as the login page would make it."""
    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.sessions.backends.db import SessionStore

    session = SessionStore()
    session.update({SESSION_KEY: str(user.pk), BACKEND_SESSION_KEY: settings.AUTHENTICATION_BACKENDS[-1]})
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    return session.session_key


def web_server(arguments: str, port: int) -> subprocess.Popen:
    env = {
        **os.environ,
        "SIMIA_BIND": f"127.0.0.1:{port}",
        # One account plays every client here: its per-user rate would otherwise stop the run, not the server.
        "SIMIA_THROTTLE_USER": "1000000/minute",
        "SIMIA_ENV_MAX_LIVE_SESSIONS": "100000",
    }
    # gunicorn reads ./gunicorn.conf.py unless told otherwise ("-k sync -w 4" overrides its choices).
    command = [sys.executable, "-m", "gunicorn", *shlex.split(arguments), "simia_web.wsgi"]
    log = open(os.environ.get("SIMIA_BENCH_SERVER_LOG", os.devnull), "w")  # noqa: SIM115 (the server holds it)
    server = subprocess.Popen(command, cwd=ROOT, env=env, stderr=log, start_new_session=True)
    import httpx

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"http://127.0.0.1:{port}/accounts/login/", timeout=5)
            return server
        except httpx.TransportError:
            time.sleep(0.3)
    server.terminate()
    raise SystemExit("the web server did not start")
