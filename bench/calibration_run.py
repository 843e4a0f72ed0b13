"""Calibration run time on 1,000 human-rated items against a slow OpenAI-compatible server (run apart).

Writes --items trajectories, each rated by two annotators on every judge criterion (the people's grades vary by
item and by person), then times one `calibrate` job (the judge over every rated item, then the figures) on a real
Celery worker against the scripted server of the tests answering each judge call after --latency seconds, with
--concurrency requests allowed at once. Prints the run time beside the ideal (items x latency / concurrency), the
time of the figures' unit, and the time of the calibration page on the finished run; a JSON report last.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench \\
    CELERY_BROKER_URL=redis://127.0.0.1:6379/13 python bench/calibration_run.py [--items 1000 --latency 1.0]

With --endpoint URL --model NAME the judge is a real server instead (the ideal then assumes --latency).

Uses (and resets) the database named in DATABASE_URL.
"""

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/simia_bench")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


def labelled_set(items: int) -> list[int]:
    """`items` trajectories with two people's ratings each, written through the services the pages use."""
    from simia_web.accounts.services import user_create
    from simia_web.calibration.services import rating_save
    from simia_web.simulation.judge import CRITERIA, GRADES
    from tests.support.factories import conversation, make_trajectory

    rng = random.Random(7)
    people = [user_create(username=f"rater{i}", role="annotator", password="correct-horse-9") for i in range(2)]
    ids = []
    for n in range(items):
        trajectory = make_trajectory(domain="bench", messages=conversation(f"Please cancel order W{n}."))
        quality = rng.randrange(len(GRADES))
        for person in people:
            grades = {c: GRADES[min(10, max(0, quality + rng.randint(-2, 2)))] for c in CRITERIA}
            rating_save(trajectory_id=trajectory.pk, annotator=person, text_version=1, scores=grades)
        ids.append(trajectory.pk)
    return ids


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--latency", type=float, default=1.0, help="Seconds the server takes per judge call.")
    parser.add_argument("--concurrency", type=int, default=32, help="Concurrent requests the endpoint allows.")
    parser.add_argument("--threads", type=int, default=32, help="Worker threads.")
    parser.add_argument("--endpoint", help="A real OpenAI-compatible server's base URL instead of the scripted one.")
    parser.add_argument("--model", default="stub", help="The model to ask for at --endpoint.")
    args = parser.parse_args()

    from rollout_throughput import fresh_environment, scripted_server

    fresh_environment()
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from simia_web.accounts.models import User
    from simia_web.calibration.models import CalibrationRun
    from simia_web.calibration.services import calibration_job_create
    from simia_web.jobs.models import JobUnit
    from simia_web.llm.models import EndpointProfile, LLMCall
    from tests.support.processes import WorkerProcess

    if args.endpoint:
        stub = None
        EndpointProfile.objects.create(
            name="bench",
            base_url=args.endpoint,
            model=args.model,
            is_default=True,
            max_concurrency=args.concurrency,
            timeout_seconds=900,  # a small CPU-only server reads a judge prompt in minutes
        )
    else:
        stub, _ = scripted_server(args.latency, max_concurrency=args.concurrency)
    started = time.monotonic()
    labelled_set(args.items)
    print(f"{args.items} items rated by 2 people written in {time.monotonic() - started:.1f} s", flush=True)

    worker = WorkerProcess(os.environ.copy(), args.threads, hostname="bench@%h").start()
    try:
        time.sleep(3)  # let the worker connect before the clock starts
        started = time.monotonic()
        job = calibration_job_create(prompt_version="judge-v4")
        while job.is_active:
            time.sleep(0.2)
            job.refresh_from_db()
        wall = time.monotonic() - started
    finally:
        worker.stop()
        if stub is not None:
            stub.terminate()

    run = CalibrationRun.objects.get(job=job)
    summary_unit = JobUnit.objects.get(job=job, stage="summary")
    figures_seconds = (summary_unit.finished_at - summary_unit.started_at).total_seconds()
    ideal = args.items * args.latency / args.concurrency
    client = Client(HTTP_HOST="localhost")
    client.force_login(User.objects.get(username="rater0"))
    with CaptureQueriesContext(connection) as queries:
        page_started = time.monotonic()
        page = client.get(f"/calibration/runs/{run.pk}/")
        page_seconds = time.monotonic() - page_started
    report = {
        "items": args.items,
        "latency_s": args.latency,
        "concurrency": args.concurrency,
        "job_status": job.status,
        "run_seconds": round(wall, 2),
        "ideal_seconds": round(ideal, 2),
        "share_of_ideal": round(ideal / wall, 3),
        "judge_calls": LLMCall.objects.filter(job=job).count(),
        "answers_failed": run.summary.get("failed"),
        "figures_unit_seconds": round(figures_seconds, 3),
        "page_status": page.status_code,
        "page_seconds": round(page_seconds, 3),
        "page_queries": len(queries),
        "overall_kappa": run.summary["figures"]["passed"]["kappa"],
    }
    print(
        f"calibration of {args.items} items at {args.latency} s a call, {args.concurrency} at once: {wall:.1f} s "
        f"(ideal {ideal:.1f} s, {ideal / wall:.0%}); figures {figures_seconds:.2f} s; page {page_seconds:.2f} s"
    )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
