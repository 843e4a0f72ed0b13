"""Rollout throughput of one worker process against a slow OpenAI-compatible server.

Target (issue 2): with 200 ms per LLM call and 32 concurrent requests allowed, a job of 200
rollouts of about 4 LLM calls each reaches at least 85% of the ideal 32 / 0.2 = 160 calls/s.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/13 python bench/rollout_throughput.py [--rollouts 200]

Uses (and resets) the database named in DATABASE_URL.
"""

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/simia_bench")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


def reset_database(url: str) -> None:
    import psycopg

    name = url.rsplit("/", 1)[1]
    with psycopg.connect(url.rsplit("/", 1)[0] + "/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{name}"')


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--per-task", type=int, default=4)
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()

    reset_database(os.environ["DATABASE_URL"])
    import django

    django.setup()
    import redis
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    redis.Redis.from_url(os.environ["CELERY_BROKER_URL"]).flushdb()

    from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
    from simia_web.jobs.models import Job
    from simia_web.llm.models import EndpointProfile, LLMCall
    from simia_web.synthesis.services import rollout_queue
    from tests.support.llm_stub import StubLLM
    from tests.support.scripts import APIS, pipeline_responder, tasks_answer

    stub = StubLLM(responder=pipeline_responder(), latency=args.latency).start()
    EndpointProfile.objects.create(
        name="bench",
        base_url=stub.url,
        model="stub",
        is_default=True,
        max_concurrency=args.concurrency,
        timeout_seconds=30,
    )
    domain = domain_ensure(name="bench")
    apis_store(domain=domain, apis=APIS["apis"], state_schema=APIS["state_schema"], initial_state=APIS["initial_state"])
    task_count = args.rollouts // args.per_task
    tasks_store(domain=domain, tasks=tasks_answer(task_count)["tasks"][:task_count])

    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "simia_web",
            "worker",
            "--pool",
            "threads",
            "--concurrency",
            str(args.concurrency),
            "--loglevel",
            "WARNING",
            "--without-gossip",
            "--without-mingle",
        ],
        cwd=ROOT,
        env=os.environ.copy(),
    )
    try:
        time.sleep(3)  # let the worker connect before the clock starts
        profiler = None
        if os.environ.get("BENCH_PROFILE"):
            profiler = subprocess.Popen(
                [
                    "py-spy",
                    "record",
                    "-p",
                    str(worker.pid),
                    "-o",
                    os.environ["BENCH_PROFILE"],
                    "-f",
                    "raw",
                    "-r",
                    "200",
                    "--gil",
                ]
            )
        import psutil

        idle_cpu = sum(psutil.Process(worker.pid).cpu_times()[:2])  # start-up, not the job's
        job = rollout_queue(domain="bench", rollouts=args.per_task, tasks=task_count)
        while True:
            job.refresh_from_db()
            if not job.is_active:
                break
            time.sleep(0.2)
        cpu = psutil.Process(worker.pid).cpu_times()
        if profiler:
            profiler.send_signal(2)
            profiler.wait()
        worker_cpu = cpu.user + cpu.system - idle_cpu
    finally:
        worker.terminate()
        worker.wait(timeout=30)
        stub.stop()

    job = Job.objects.get(pk=job.pk)
    seconds = (job.finished_at - job.started_at).total_seconds()
    calls = LLMCall.objects.filter(job=job).count()
    ideal = args.concurrency / args.latency
    rate = calls / seconds
    print(f"job {job.pk} {job.status}: {job.summary.get('trajectories')} in {seconds:.2f} s")
    print(f"LLM calls: {calls} ({calls / max(1, args.rollouts):.1f} per rollout), max in flight {stub.max_in_flight}")
    print(
        f"worker CPU during the job: {worker_cpu:.2f} s over {seconds:.2f} s ({worker_cpu / seconds:.0%} of one core), "
        f"{worker_cpu / calls * 1000:.1f} ms per LLM call"
    )
    print(f"throughput: {rate:.1f} calls/s; ideal {ideal:.0f} calls/s; ratio {rate / ideal:.1%}")


if __name__ == "__main__":
    main()
