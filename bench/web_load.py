"""The production command under load: 100 concurrent clients against gunicorn as the README starts it.

Loads (once; kept for later runs) bench/review_data.py's 100k trajectories and two RL domains: the scripted shop,
and the same APIs over τ² retail's world state (1.3 MB, --rl-state retail). Starts a scripted LLM server (200 ms
answers) and `gunicorn -c gunicorn.conf.py simia_web.wsgi`, then runs each client in a loop for --seconds: most
read the REST list (all domains, or one) or a random trajectory's page, the rest (--rl-share) play RL episodes
(create a session, one tool call the simulator answers, abandon). Prints per request kind: count, p50 and p95;
requests per second; then --creates sessions created at once by one account, whose spread shows whether creates
wait on each other.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench CELERY_BROKER_URL=redis://127.0.0.1:6379/13 \\
        python bench/web_load.py [--clients 100] [--seconds 60] [--rl-state retail] [--server "-k sync -w 4"]

The clients run in this process (asyncio, one keep-alive connection each, 0.2 ms of CPU a request) on the same
machine as the server; the load average printed says how busy it was.
"""

import argparse
import asyncio
import json
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

from _pages_common import curator_session, database_ensure, web_server  # noqa: E402  (bench/ is on the path now)

# The RL domains: the scripted shop (two orders), or the same APIs over τ² retail's world state (1.3 MB).
RL_DOMAINS = {"shop": "shop_rl", "retail": "retail_rl"}
# τ² retail's database, beside the checkout (../shared) or a worktree of it (../../shared).
TAU2_RETAIL = next(
    (path for path in (base / "shared/data/tau2/retail/db.json" for base in ROOT.parents) if path.exists()), None
)


def setup(rows: int, rl_state: str) -> dict:
    """The data, a curator's token and session cookie, and the ids of trajectories to read."""
    database_ensure(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    import review_data

    review_data.load(rows)
    from simia_web.accounts.models import User
    from simia_web.accounts.services import user_token
    from simia_web.catalog.models import Domain
    from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
    from simia_web.curation.models import Trajectory
    from simia_web.environments.models import EnvSession
    from simia_web.formats.tau2 import state_schema_derive
    from tests.support.scripts import SHOP, tasks_answer

    for kind, name in RL_DOMAINS.items():
        if Domain.objects.filter(name=name).exists():
            continue
        if kind == "retail" and TAU2_RETAIL is None:
            sys.exit("τ² retail's db.json is not beside the checkout (shared/data/tau2/retail)")
        state = json.loads(TAU2_RETAIL.read_text()) if kind == "retail" else {"orders": {}}
        state["orders"].update(SHOP["initial_state"]["orders"])  # the orders the scripted simulator changes
        domain = domain_ensure(name=name, policy="Only pending orders can be cancelled.")
        apis_store(domain=domain, apis=SHOP["apis"], state_schema=state_schema_derive(state), initial_state=state)
        tasks_store(domain=domain, tasks=tasks_answer(20)["tasks"][:20])
    user, _ = User.objects.get_or_create(username="bench-load", defaults={"role": "curator"})
    EnvSession.objects.filter(created_by=user).delete()
    # Pages of the loaded trajectories (not of the RL episodes earlier runs stored).
    ids = list(Trajectory.objects.filter(kind="rollout").order_by("?").values_list("pk", flat=True)[:5000])
    return {
        "token": user_token(user=user),
        "cookie": curator_session(user),
        "ids": ids,
        "rl_domain": RL_DOMAINS[rl_state],
    }


def llm_server(latency: float) -> tuple[subprocess.Popen, str]:
    """The scripted OpenAI-compatible server in its own process, set as the default endpoint."""
    from simia_web.llm.models import EndpointProfile

    stub = subprocess.Popen(
        [sys.executable, "-m", "tests.support.llm_stub", str(latency)], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    url = stub.stdout.readline().strip()
    EndpointProfile.objects.update(is_default=False)
    EndpointProfile.objects.update_or_create(
        name="bench-load",
        defaults={"base_url": url, "model": "stub", "is_default": True, "max_concurrency": 256, "timeout_seconds": 30},
    )
    return stub, url


class Connection:
    """One keep-alive HTTP/1.1 connection, as lean as a client can be: httpx spent more CPU per request than the
    server on this machine's two cores. Bodies come with a Content-Length or chunked."""

    def __init__(self, port: int, headers: dict):
        self.port, self.head = port, "".join(f"{name}: {value}\r\n" for name, value in headers.items())
        self.reader = self.writer = None

    async def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        content = json.dumps(body).encode() if body is not None else b""
        extra = f"Content-Type: application/json\r\nContent-Length: {len(content)}\r\n" if body is not None else ""
        request = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n{self.head}{extra}\r\n".encode() + content
        for attempt in (1, 2):  # a kept-alive connection the server closed is opened again once
            try:
                if self.writer is None:
                    self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 24)
                self.writer.write(request)
                return await self._response()
            except (ConnectionError, asyncio.IncompleteReadError):
                self.writer = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    async def _response(self) -> tuple[int, bytes]:
        head = (await self.reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        status = int(head[0].split()[1])
        fields = dict(line.lower().split(": ", 1) for line in head[1:] if ": " in line)
        if "content-length" in fields:
            body = await self.reader.readexactly(int(fields["content-length"]))
        else:  # chunked
            parts = []
            while size := int((await self.reader.readuntil(b"\r\n")).strip(), 16):
                parts.append(await self.reader.readexactly(size))
                await self.reader.readexactly(2)
            await self.reader.readexactly(2)
            body = b"".join(parts)
        if fields.get("connection") == "close":
            self.writer.close()
            self.writer = None
        return status, body


class Client:
    """One simulated user on its own connection, with the curator's token and session, timing each request."""

    def __init__(self, port: int, data: dict, timings: dict):
        headers = {"Authorization": f"Token {data['token']}", "Cookie": f"sessionid={data['cookie']}"}
        self.connection, self.data, self.timings = Connection(port, headers), data, timings

    async def timed(self, kind: str, method: str, path: str, body: dict | None = None) -> tuple[int, bytes]:
        started = time.perf_counter()
        status, content = await self.connection.request(method, path, body)
        self.timings.setdefault(kind, []).append(time.perf_counter() - started)
        if status >= 400:
            self.timings.setdefault("errors", []).append(f"{kind} {status}")
        return status, content

    async def rest_list(self):
        domain = random.choice(["retail", "airline", "banking", "calendar", "telecom", "travel", ""])
        await self.timed("REST list", "GET", "/api/v1/trajectories/" + (f"?domain={domain}" if domain else ""))

    async def trajectory_page(self):
        await self.timed("trajectory page", "GET", f"/trajectories/{random.choice(self.data['ids'])}/")

    async def rl_create(self) -> str | None:
        status, content = await self.timed("RL create", "POST", "/api/v1/envs/", {"domain": self.data["rl_domain"]})
        return json.loads(content)["id"] if status == 201 else None

    async def rl_episode(self):
        session = await self.rl_create()
        if session is None:
            return
        call = {"id": "call_1", "type": "function"}
        call["function"] = {"name": "cancel_order", "arguments": '{"order_id": "W1", "reason": "wrong size"}'}
        await self.timed("RL step", "POST", f"/api/v1/envs/{session}/step", {"message": {"tool_calls": [call]}})
        await self.timed("RL abandon", "POST", f"/api/v1/envs/{session}/abandon")


async def run(port: int, data: dict, clients: int, seconds: float, rl_share: float) -> dict:
    timings: dict = {}
    stop = time.monotonic() + seconds

    async def loop(index: int):
        client = Client(port, data, timings)
        playing = index < clients * rl_share
        while time.monotonic() < stop:
            if playing:
                await client.rl_episode()
            else:
                await random.choice([client.rest_list, client.trajectory_page])()

    started = time.monotonic()
    await asyncio.gather(*(loop(i) for i in range(clients)))
    timings["elapsed"] = time.monotonic() - started
    return timings


async def creates_at_once(port: int, data: dict, count: int) -> list[float]:
    timings: dict = {}
    await asyncio.gather(*(Client(port, data, timings).rl_create() for _ in range(count)))
    assert "errors" not in timings, timings["errors"][:5]
    return timings["RL create"]


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def cpu_seconds(pid: int, *, children: bool = True) -> float:
    """CPU time of a process, and of its children (the server's workers) unless told not to."""
    import psutil

    process = psutil.Process(pid)
    return sum(sum(p.cpu_times()[:2]) for p in [process, *(process.children(recursive=True) if children else [])])


def database_cpu() -> dict[int, float]:
    """CPU seconds so far of each PostgreSQL backend serving this database (the server's connections)."""
    import psutil
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        pids = [pid for (pid,) in cursor.fetchall()]
    found = {}
    for pid in pids:
        try:
            found[pid] = sum(psutil.Process(pid).cpu_times()[:2])
        except psutil.Error:  # ended meanwhile
            continue
    return found


def machine_busy() -> float:
    """CPU seconds the whole machine spent busy so far (all processes, from /proc/stat)."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle and iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def report(timings: dict, server_cpu: float, client_cpu: float, database: float, busy: float) -> None:
    elapsed = timings.pop("elapsed")
    errors = timings.pop("errors", [])
    total = sum(len(values) for values in timings.values())
    print(f"{'request':<18} {'count':>7} {'p50 s':>7} {'p95 s':>7}")
    for kind, values in sorted(timings.items()):
        print(f"{kind:<18} {len(values):>7} {statistics.median(values):>7.3f} {percentile(values, 0.95):>7.3f}")
    print(f"{total} requests in {elapsed:.1f} s: {total / elapsed:.1f} requests/s; {len(errors)} errors {errors[:5]}")
    load = os.getloadavg()[0]
    server, client = (1000 * cpu / max(1, total) for cpu in (server_cpu, client_cpu))
    print(f"CPU a request: server {server:.1f} ms, clients {client:.1f} ms; load average {load:.1f}")
    others = busy - server_cpu - client_cpu - database
    print(
        f"of {os.cpu_count()} CPUs, busy {busy / elapsed:.2f}: the server {server_cpu / elapsed:.2f}, its PostgreSQL "
        f"{database / elapsed:.2f}, the clients {client_cpu / elapsed:.2f}, everything else {others / elapsed:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000, help="Trajectories in the database.")
    parser.add_argument("--clients", type=int, default=100)
    parser.add_argument("--seconds", type=float, default=60, help="0: only the sessions created at once.")
    parser.add_argument("--rl-share", type=float, default=0.2, help="Share of the clients playing RL episodes.")
    parser.add_argument("--creates", type=int, default=50, help="Sessions one account creates at once, after.")
    parser.add_argument("--latency", type=float, default=0.2, help="Seconds the scripted LLM takes to answer.")
    parser.add_argument("--rl-state", choices=sorted(RL_DOMAINS), default="shop", help="The RL domain's world state.")
    parser.add_argument("--port", type=int, default=int(os.environ.get("SIMIA_BENCH_PORT", "16480")))
    parser.add_argument("--server", default="-c gunicorn.conf.py", help="gunicorn's arguments (the README's).")
    args = parser.parse_args()
    data = setup(args.rows, args.rl_state)
    stub, _ = llm_server(args.latency)
    server = None
    try:
        server = web_server(args.server, args.port)
        print(
            f"gunicorn {args.server}; {args.rows:,} trajectories; {args.clients} clients for {args.seconds:.0f} s, "
            f"{args.rl_share:.0%} of them playing RL episodes over the {args.rl_state} world state"
        )
        if args.seconds:
            asyncio.run(run(args.port, data, min(args.clients, 10), 5, args.rl_share))  # warm up
            before, clients_before = cpu_seconds(server.pid), cpu_seconds(os.getpid(), children=False)
            busy, database = machine_busy(), database_cpu()
            timings = asyncio.run(run(args.port, data, args.clients, args.seconds, args.rl_share))
            server_cpu = cpu_seconds(server.pid) - before
            database_used = sum(cpu - database.get(pid, 0.0) for pid, cpu in database_cpu().items())
            clients_cpu = cpu_seconds(os.getpid(), children=False) - clients_before
            report(timings, server_cpu, clients_cpu, database_used, machine_busy() - busy)
        if args.creates:
            times = asyncio.run(creates_at_once(args.port, data, args.creates))
            print(
                f"{args.creates} RL sessions created at once by one account: p50 {statistics.median(times):.3f} s, "
                f"p95 {percentile(times, 0.95):.3f} s, slowest {max(times):.3f} s"
            )
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=60)
        stub.terminate()


if __name__ == "__main__":
    main()
