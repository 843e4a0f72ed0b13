"""The faults, each injected mid-job into a FaultRun, with the time the cluster took to heal.

Each scenario returns its figures (seconds, from the moment the server was back or the worker died):
when the lost units were sent again, when a unit next finished, when the job ended. The fault tests
print them and check what the job left behind; bench/fault_healing.py prints them alone.
"""

import subprocess
import sys
import time

import httpx

from tests.support.parallel import free_port
from tests.support.processes import ROOT

from .cluster import PASSWORD, PORTS, USERNAME, FaultRun, csrf_token, wait_until

DOWN_SECONDS = 7.0  # how long a server stays down: longer than a unit lease (3 heartbeats of 2 s here)


def broker_restart(run: FaultRun) -> dict:
    """Redis (broker and endpoint limits) killed without persistence mid-job, started again empty."""
    run.worker(concurrency=4)
    run.worker(concurrency=4)
    run.queue_job()
    run.fault_strikes()
    run.servers.redis.kill()
    killed_at = time.time()
    run.answer_again()
    time.sleep(DOWN_SECONDS)  # units in flight wait for the limits' Redis; their next request is not sent
    back_at = time.time()  # from the restart's start: the figures below include Redis's own start
    run.servers.redis.start()
    ended_at = run.wait_job_end()
    units = run.units()
    resent = [u for u in units if u["dispatched_at"] > killed_at]
    return {
        "down": back_at - killed_at,
        "units": len(units),
        "sent_again": len(resent),
        "all_sent_again_after": max((u["dispatched_at"] for u in resent), default=back_at) - back_at,
        **_progress(units, back_at, ended_at),
    }


def database_restart(run: FaultRun) -> dict:
    """PostgreSQL stopped (fast shutdown: every connection ended) mid-job and started again; one worker uses a
    connection pool. A web server answers through it: 503 with Retry-After while it is down, then 200."""
    run.worker(concurrency=4)
    run.worker(concurrency=6, SIMIA_DB_POOL_SIZE="3")
    web = _web(run)
    web.get_all(times=4)  # every web process holds a connection now
    run.queue_job()
    run.fault_strikes()
    run.servers.postgres.stop()
    stopped_at = time.time()
    run.answer_again()  # units in flight go on until they next need the database
    during = web.get_all(times=1)
    time.sleep(DOWN_SECONDS)
    back_at = time.time()
    run.servers.postgres.start()
    recovering, recovered_at = web.until_answered(timeout=60)
    after = web.get_all(times=4)
    ended_at = run.wait_job_end()
    return {
        "down": back_at - stopped_at,
        "units": len(run.units()),
        "web_recovered_after": recovered_at - back_at,
        "web_during": during + recovering,
        "web_after": after,
        **_progress(run.units(), back_at, ended_at),
    }


def worker_kill(run: FaultRun) -> dict:
    """One of two workers killed with SIGKILL mid-job; nobody starts another."""
    victim, _ = run.worker(concurrency=4)
    run.worker(concurrency=4)
    run.queue_job()
    run.fault_strikes()
    victim.kill()
    killed_at = time.time()
    holder = f":{victim.pid}"
    held = {u["id"] for u in run.units() if u["status"] == "pending" and u["lease_holder"].endswith(holder)}
    run.killed_worker_units = held
    run.answer_again()
    ended_at = run.wait_job_end()
    units = run.units()
    resent = [u for u in units if u["id"] in held]
    return {
        "units": len(units),
        "held_by_the_killed_worker": len(held),
        "all_sent_again_after": max((u["dispatched_at"] for u in resent), default=killed_at) - killed_at,
        **_progress(units, killed_at, ended_at),
    }


def figures_line(figures: dict) -> str:
    shown = (f"{key} {value:.1f} s" if isinstance(value, float) else f"{key} {value}" for key, value in figures.items())
    return ", ".join(shown)


def _progress(units: list[dict], since: float, ended_at: float) -> dict:
    finished_after = [u["finished_at"] for u in units if u["finished_at"] and u["finished_at"] > since]
    return {
        "first_unit_done_after": min(finished_after, default=ended_at) - since,
        "job_ended_after": ended_at - since,
    }


class _Web:
    """A gunicorn serving the run's database; gets a page (with a session) and a REST list (with a token)."""

    def __init__(self, url: str, token: str):
        self.url = url
        self.api = httpx.Client(base_url=url, headers={"Authorization": f"Token {token}"}, timeout=30)
        self.browser = httpx.Client(base_url=url, timeout=30)
        login = self.browser.get("/accounts/login/")
        form = {"username": USERNAME, "password": PASSWORD, "csrfmiddlewaretoken": csrf_token(login.text)}
        self.browser.post("/accounts/login/", data=form, headers={"Referer": f"{url}/accounts/login/"})

    def get_all(self, *, times: int) -> list[tuple[int, str | None]]:
        """(status, Retry-After) of the REST list and the jobs page, `times` times each."""
        answers = []
        for _ in range(times):
            for client, path in ((self.api, "/api/v1/jobs/"), (self.browser, "/jobs/")):
                response = client.get(path)
                answers.append((response.status_code, response.headers.get("retry-after")))
        return answers

    def until_answered(self, *, timeout: float) -> tuple[list[tuple[int, str | None]], float]:
        """Ask until both answer 200; the answers before that, and when that happened."""
        answers, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline:
            latest = self.get_all(times=1)
            if all(status == 200 for status, _ in latest):
                return answers, time.time()
            answers += latest
            time.sleep(0.2)
        raise AssertionError(f"the web processes still answer {answers[-2:]} {timeout:.0f} s after the restart")


def _web(run: FaultRun) -> _Web:
    port = free_port(PORTS)
    gunicorn = [sys.executable, "-m", "gunicorn", "-c", "gunicorn.conf.py", "simia_web.wsgi", "-w", "2"]
    gunicorn += ["-b", f"127.0.0.1:{port}"]  # the production command: threads sharing a pool of connections
    server = subprocess.Popen([*gunicorn, "--log-level", "warning"], cwd=ROOT, env=run.env)
    run.others.append(server)
    url = f"http://127.0.0.1:{port}"
    wait_until(lambda: server.poll() is not None or _answers(url), timeout=60, what="gunicorn to answer")
    assert server.poll() is None, "gunicorn stopped"
    return _Web(url, run.servers.token)


def _answers(url: str) -> bool:
    try:
        return httpx.get(f"{url}/accounts/login/", timeout=5).status_code == 200
    except httpx.HTTPError:
        return False
