"""RL environment: step overhead excluding LLM time, and steps/s of many concurrent sessions.

1. Overhead: whole episodes through the real HTTP stack in this process (Django test client: middleware,
   token auth, DRF, services, the compare-and-set write, the trajectory) against a zero-latency scripted
   LLM server; per step, wall time minus the latency_ms of its LLM calls, and the CPU time of the
   request's thread (the scripted server runs in other threads, so its CPU is not counted).
2. Concurrency: gunicorn (gthread) serving the app, a scripted LLM server in another process answering
   every call after 1 s, and 64 then 256 sessions stepping at once from an async httpx client: steps/s,
   errors, and the database connections in use (PostgreSQL's pg_stat_activity, sampled throughout).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia python bench/env_step_overhead.py

A throwaway database is created and dropped; the configured database is never touched.
"""

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

import django  # noqa: E402

django.setup()

from django.conf import settings  # noqa: E402
from django.db import connection  # noqa: E402
from django.test.utils import setup_test_environment, teardown_test_environment  # noqa: E402
from rest_framework.test import APIClient  # noqa: E402

from simia_web.accounts.services import user_create, user_token  # noqa: E402
from simia_web.catalog.models import Api, Domain, Task  # noqa: E402
from simia_web.llm.models import EndpointProfile, LLMCall  # noqa: E402
from tests.support.llm_stub import Reply, StubLLM  # noqa: E402
from tests.support.scripts import JUDGE_PASS, SHOP, simulator_reply  # noqa: E402


def responder(request):
    if request.stage == "simulator":
        return simulator_reply(request)
    if request.stage == "user_simulator":
        return Reply(content={"message": "Thanks, that's all.", "done": True})
    if request.stage == "judge":
        return Reply(content=JUDGE_PASS)
    return Reply(status=500, error_message=f"no script for stage {request.stage!r}")


def serve_stub(latency: float) -> None:
    """The scripted server in a process of its own (so its threads do not share the bench's GIL)."""
    stub = StubLLM(responder=responder, latency=latency)
    stub.server.request_queue_size = 1024
    stub.start()
    print(stub.url, flush=True)
    stub.thread.join()


def fixtures(llm_url: str) -> tuple[str, int]:
    EndpointProfile.objects.update(is_default=False)
    EndpointProfile.objects.create(
        name="bench-stub", base_url=llm_url, model="stub", is_default=True, timeout_seconds=30, max_concurrency=1024
    )
    domain = Domain.objects.create(
        name="bench-shop", state_schema=SHOP["state_schema"], initial_state=SHOP["initial_state"], policy="Be nice."
    )
    for api in SHOP["apis"][:2]:
        Api.objects.create(domain=domain, **api)
    task = Task.objects.create(domain=domain, instruction="Cancel my order W1.", expected_outcome="W1 cancelled")
    user = user_create(username="bench", role="curator", password="bench-password-1")
    return user_token(user=user), task.pk


def call_message(n: int) -> dict:
    arguments = '{"order_id": "W1", "reason": "wrong size"}'
    return {
        "tool_calls": [
            {"id": f"call_{n}", "type": "function", "function": {"name": "cancel_order", "arguments": arguments}}
        ]
    }


FINAL = {"content": "Your order W1 is cancelled."}


def report(label: str, samples: list[float]) -> None:
    if not samples:
        return
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    print(
        f"  {label:<28} n={len(samples):<5} mean={statistics.fmean(samples):7.2f} ms  "
        f"p50={statistics.median(samples):7.2f} ms  p95={p95:7.2f} ms"
    )


# -- 1. overhead -------------------------------------------------------------------------------------


def timed(client: APIClient, url: str, body: dict) -> tuple[float, float, float]:
    """(wall ms, LLM ms, thread CPU ms) of one request."""
    before = LLMCall.objects.order_by("-id").values_list("id", flat=True).first() or 0
    started, cpu = time.perf_counter(), time.thread_time()
    response = client.post(url, body, format="json")
    wall, cpu = (time.perf_counter() - started) * 1000, (time.thread_time() - cpu) * 1000
    assert response.status_code in (200, 201), response.content
    llm = sum(LLMCall.objects.filter(id__gt=before).values_list("latency_ms", flat=True))
    return wall, float(llm), cpu


def overhead(token: str, task_id: int, episodes: int, tool_steps: int) -> None:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    wall_minus_llm = {"tool call step": [], "final step (judge)": []}
    cpu = {"tool call step": [], "final step (judge)": []}
    for _ in range(episodes):
        env_id = client.post("/api/v1/envs/", {"task": task_id, "max_steps": 50}, format="json").json()["id"]
        url = f"/api/v1/envs/{env_id}/step"
        for n in range(tool_steps + 1):
            label = "tool call step" if n < tool_steps else "final step (judge)"
            wall, llm, thread_cpu = timed(client, url, {"message": call_message(n) if n < tool_steps else FINAL})
            wall_minus_llm[label].append(wall - llm)
            cpu[label].append(thread_cpu)
    print(f"overhead per step ({episodes} episodes, zero-latency LLM, {connection.vendor}):")
    for label in wall_minus_llm:
        report(f"{label}: wall - LLM", wall_minus_llm[label])
        report(f"{label}: thread CPU", cpu[label])


# -- 2. concurrency ----------------------------------------------------------------------------------


def connections_in_use(stop: threading.Event, samples: list[tuple[int, int]], db_name: str) -> None:
    """Sample (connections open, of which active) to the bench database until stopped."""
    import psycopg

    params = settings.DATABASES["default"]
    with psycopg.connect(
        host=params["HOST"] or "127.0.0.1",
        port=params["PORT"] or 5432,
        user=params["USER"],
        dbname="postgres",
        autocommit=True,
    ) as conn:
        while not stop.is_set():
            row = conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity WHERE datname = %s",
                (db_name,),
            ).fetchone()
            samples.append((row[0], row[1]))
            stop.wait(0.1)


async def sessions_run(base: str, token: str, task_id: int, sessions: int, tool_steps: int) -> dict:
    import httpx

    limits = httpx.Limits(max_connections=sessions + 8, max_keepalive_connections=sessions + 8)
    headers = {"Authorization": f"Token {token}"}
    async with httpx.AsyncClient(base_url=base, headers=headers, timeout=120, limits=limits) as http:
        created = await asyncio.gather(
            *(http.post("/api/v1/envs/", json={"task": task_id, "max_steps": 50}) for _ in range(sessions))
        )
        ids = [r.raise_for_status().json()["id"] for r in created]
        failures: list[str] = []
        steps = 0

        async def episode(env_id: str) -> None:
            nonlocal steps
            for n in range(tool_steps + 1):
                body = {"message": call_message(n) if n < tool_steps else FINAL}
                try:
                    response = await http.post(f"/api/v1/envs/{env_id}/step", json=body)
                except httpx.TransportError as exc:
                    failures.append(f"{type(exc).__name__}: {exc}")
                    return
                if response.status_code != 200:
                    failures.append(f"{response.status_code} {response.text[:200]}")
                    return
                steps += 1

        started = time.perf_counter()
        await asyncio.gather(*(episode(env_id) for env_id in ids))
        elapsed = time.perf_counter() - started
    return {"steps": steps, "elapsed": elapsed, "failures": failures}


def concurrency(token: str, task_id: int, llm_url: str, levels: list[int], tool_steps: int, threads: int) -> None:
    db = settings.DATABASES["default"]
    env = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}",
        "SIMIA_ENV_MAX_LIVE_SESSIONS": "100000",
        "SIMIA_DB_POOL_SIZE": os.environ.get("SIMIA_DB_POOL_SIZE", "8"),
        "SIMIA_LOG_LEVEL": "WARNING",
    }
    port = 18000 + os.getpid() % 1000
    server = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "gunicorn"),
            "simia_web.wsgi",
            "-k",
            "gthread",
            "-w",
            "2",
            "--threads",
            str(threads),
            "-b",
            f"127.0.0.1:{port}",
            "--log-level",
            "warning",
            "--backlog",
            "1024",
            "--keep-alive",
            "300",
        ],
        cwd=ROOT,
        env=env,
    )
    try:
        import httpx

        for _ in range(100):
            try:
                httpx.get(f"http://127.0.0.1:{port}/api/schema/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        with connection.cursor() as cursor:
            cursor.execute("SHOW max_connections")
            max_connections = cursor.fetchone()[0]
        print(
            f"concurrent sessions (gunicorn gthread 2x{threads}, a pool of {env['SIMIA_DB_POOL_SIZE']} "
            f"database connections per process, LLM answers after 1 s, {tool_steps} tool-call steps + a final "
            "step each):"
        )
        for sessions in levels:
            samples: list[tuple[int, int]] = []
            stop = threading.Event()
            sampler = threading.Thread(target=connections_in_use, args=(stop, samples, db["NAME"]))
            sampler.start()
            result = asyncio.run(sessions_run(f"http://127.0.0.1:{port}", token, task_id, sessions, tool_steps))
            stop.set()
            sampler.join()
            print(
                f"  {sessions:>4} sessions: {result['steps'] / result['elapsed']:7.1f} steps/s "
                f"({result['steps']} steps in {result['elapsed']:.1f} s; ideal {sessions:.0f}/s), "
                f"{len(result['failures'])} failed; DB connections open max {max(s[0] for s in samples)}, "
                f"active max {max(s[1] for s in samples)} (server max_connections {max_connections})"
            )
            for failure in result["failures"][:3]:
                print(f"    e.g. {failure}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--tool-steps", type=int, default=3, help="tool-call steps per episode before the answer")
    parser.add_argument("--sessions", type=int, nargs="*", default=[64, 256], help="concurrency levels (PostgreSQL)")
    parser.add_argument("--threads", type=int, default=160, help="gunicorn threads per worker process")
    parser.add_argument("--serve-stub", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_stub is not None:
        serve_stub(args.serve_stub)
        return

    setup_test_environment()
    old_name = connection.creation.create_test_db(verbosity=0, autoclobber=True)
    fast = StubLLM(responder=responder).start()
    try:
        token, task_id = fixtures(fast.url)
        overhead(token, task_id, args.episodes, args.tool_steps)
        if connection.vendor == "postgresql" and args.sessions:
            slow = subprocess.Popen(
                [sys.executable, __file__, "--serve-stub", "1.0"], stdout=subprocess.PIPE, text=True, cwd=ROOT
            )
            try:
                slow_url = slow.stdout.readline().strip()
                EndpointProfile.objects.filter(is_default=True).update(base_url=slow_url)
                concurrency(token, task_id, slow_url, args.sessions, args.tool_steps, args.threads)
            finally:
                slow.terminate()
                slow.wait(timeout=10)
    finally:
        fast.stop()
        connection.close()
        connection.creation.destroy_test_db(old_name, verbosity=0)
        teardown_test_environment()


if __name__ == "__main__":
    main()
