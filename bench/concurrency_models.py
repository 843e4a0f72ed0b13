"""Which way of running a worker's units can reach the endpoint's capacity, before rewriting the worker for it.

Each model runs the same job against the scripted server (its own process, answering after --latency):
--rollouts chains of --calls LLM calls each, at most --concurrency requests at once, and the same CPU per
call on top of the `openai` client's own: --work ms (5-6 ms of worker CPU per call against 2.9-3.2 ms of
the bare client's, per bench/rollout_throughput.py), of which the --db-share is database work.

- asyncio: a bare AsyncOpenAI client behind a semaphore, no work (the ceiling rollout_throughput uses).
- asyncio, work in the loop: every unit a coroutine, all of its CPU on the event loop.
- asyncio, database on one thread: the same, with the database share run on one thread, as Django's
  sync_to_async(thread_sensitive=True) would (the ORM cannot run on the loop).
- threads: the worker today: a thread per unit, a client per thread, a semaphore across them.
- threads, exchanges on a loop: unit threads that hand each HTTP exchange to one asyncio loop running
  AsyncOpenAI (the slot is taken by the thread and given back by the loop as the answer arrives).
- threads, conversations on a loop: unit threads that do the database work and hand the whole LLM
  conversation to one asyncio loop.

At most --units units are in flight in every model (the worker's threads). Prints calls/s per model, its
share of the ideal (concurrency / latency) and of the asyncio ceiling measured in the same run.

    python bench/concurrency_models.py [--work 2.5] [--units 64] [--rollouts 200]
"""

import argparse
import asyncio
import statistics
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx2
import openai

ROOT = Path(__file__).resolve().parent.parent
REQUEST = {"model": "stub", "messages": [{"role": "user", "content": "hello " * 200}], "max_tokens": 50}


def burn(ms: float) -> None:
    """Use this much CPU time (of this thread: time spent waiting for the GIL does not count)."""
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


class Job:
    def __init__(self, args):
        self.args = args
        self.db_ms = args.work * args.db_share * args.calls  # per unit: read before, written after
        self.loop_ms = args.work * (1 - args.db_share)  # per call

    def rate(self, seconds: float) -> float:
        return self.args.rollouts * self.args.calls / seconds


def async_client(url: str, size: int) -> openai.AsyncOpenAI:
    """A bare AsyncOpenAI client keeping up to `size` connections, with no retries (the benches' ceiling)."""
    pool = httpx2.Limits(max_connections=size, max_keepalive_connections=size)
    return openai.AsyncOpenAI(
        base_url=url, api_key="none", max_retries=0, http_client=openai.DefaultAsyncHttpxClient(limits=pool)
    )


async def run_async(job: Job, url: str, *, work: bool, db_thread: bool) -> float:
    args = job.args
    db = ThreadPoolExecutor(max_workers=1) if db_thread else None
    loop = asyncio.get_running_loop()

    async def database(ms: float) -> None:
        if db is not None:
            await loop.run_in_executor(db, burn, ms)
        elif work:
            burn(ms)

    async with async_client(url, args.concurrency) as client:
        gate, units = asyncio.Semaphore(args.concurrency), asyncio.Semaphore(args.units)

        async def unit() -> None:
            async with units:
                await database(job.db_ms / 2)
                for _ in range(args.calls):
                    async with gate:
                        await client.chat.completions.create(**REQUEST)
                    if work:
                        burn(job.loop_ms)
                await database(job.db_ms / 2)

        started = time.perf_counter()
        await asyncio.gather(*(unit() for _ in range(args.rollouts)))
        seconds = time.perf_counter() - started
    if db is not None:
        db.shutdown()
    return job.rate(seconds)


def run_threads(job: Job, url: str, *, on_loop: str = "") -> float:
    """Unit threads; on_loop "exchanges" or "conversations" hands that part to one asyncio loop."""
    args = job.args
    gate = threading.Semaphore(args.concurrency)
    todo, todo_lock = list(range(args.rollouts)), threading.Lock()
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()

    async def open_client():
        return async_client(url, args.concurrency), asyncio.Semaphore(args.concurrency)

    shared, loop_gate = asyncio.run_coroutine_threadsafe(open_client(), loop).result()

    async def exchange() -> None:
        try:
            await shared.chat.completions.create(**REQUEST)
        finally:
            gate.release()

    async def conversation() -> None:
        for _ in range(args.calls):
            async with loop_gate:
                await shared.chat.completions.create(**REQUEST)
            burn(job.loop_ms)

    def worker() -> None:
        pool = httpx2.Limits(max_connections=1, max_keepalive_connections=1)
        client = openai.OpenAI(
            base_url=url, api_key="none", max_retries=0, http_client=openai.DefaultHttpxClient(limits=pool)
        )
        while True:
            with todo_lock:
                if not todo:
                    return
                todo.pop()
            burn(job.db_ms / 2)
            if on_loop == "conversations":
                asyncio.run_coroutine_threadsafe(conversation(), loop).result()
            else:
                for _ in range(args.calls):
                    if on_loop == "exchanges":
                        gate.acquire()
                        asyncio.run_coroutine_threadsafe(exchange(), loop).result()
                    else:
                        with gate:
                            client.chat.completions.create(**REQUEST)
                    burn(job.loop_ms)
            burn(job.db_ms / 2)

    threads = [threading.Thread(target=worker) for _ in range(args.units)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    asyncio.run_coroutine_threadsafe(shared.close(), loop).result()
    loop.call_soon_threadsafe(loop.stop)
    return job.rate(seconds)


MODELS = {
    "asyncio (the ceiling)": lambda job, url: asyncio.run(run_async(job, url, work=False, db_thread=False)),
    "asyncio, work in the loop": lambda job, url: asyncio.run(run_async(job, url, work=True, db_thread=False)),
    "asyncio, database on one thread": lambda job, url: asyncio.run(run_async(job, url, work=True, db_thread=True)),
    "threads": lambda job, url: run_threads(job, url),
    "threads, exchanges on a loop": lambda job, url: run_threads(job, url, on_loop="exchanges"),
    "threads, conversations on a loop": lambda job, url: run_threads(job, url, on_loop="conversations"),
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--calls", type=int, default=4, help="LLM calls per rollout, one after another.")
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--units", type=int, default=64, help="Units in flight at once (the worker's threads).")
    parser.add_argument("--work", type=float, default=2.5, help="CPU ms per call beside the client's own.")
    parser.add_argument("--db-share", type=float, default=0.46, help="The database's share of that work.")
    parser.add_argument("--repeat", type=int, default=3, help="Runs per model; the median is reported.")
    args = parser.parse_args()

    serve = "import sys; from tests.support.llm_stub import StubLLM, serve; serve(StubLLM(latency=float(sys.argv[1])))"
    server = subprocess.Popen(
        [sys.executable, "-c", serve, str(args.latency)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    url = server.stdout.readline().strip()
    job = Job(args)
    try:
        results = {}
        for name, run in MODELS.items():
            run(job, url)  # warm-up: connections, imports
            results[name] = statistics.median(run(job, url) for _ in range(args.repeat))
    finally:
        server.terminate()
    ideal = args.concurrency / args.latency
    ceiling = results["asyncio (the ceiling)"]
    print(
        f"{args.rollouts} rollouts x {args.calls} calls, {args.units} units in flight, {args.concurrency} requests "
        f"at once, {args.latency * 1000:.0f} ms per answer, {args.work} ms of work per call "
        f"({args.db_share:.0%} database); ideal {ideal:.0f} calls/s"
    )
    for name, rate in results.items():
        print(f"  {name:34} {rate:6.1f} calls/s  {rate / ideal:6.1%} of ideal  {rate / ceiling:6.1%} of the ceiling")


if __name__ == "__main__":
    main()
