"""Time of the calibration agreement figures at 2,000 ratings (run apart).

Writes --items trajectories, each judged once and rated by --raters of --people annotators on every judge
criterion through the rating service, then times the figures the calibration pages show (agreement between
annotators, and the judge against people per criterion), called --loads times each, and the two pages that show
them. Prints each time (the first load and the median of the rest) with its database queries; a JSON report last.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench python bench/calibration_figures.py [--items 1000]

Uses (and resets) the database named in DATABASE_URL.
"""

import argparse
import json
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/simia_bench")
os.environ.setdefault("CELERY_BROKER_URL", "redis://127.0.0.1:6379/13")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


def rated_set(items: int, raters: int, people_count: int) -> None:
    """`items` judged trajectories, each rated by `raters` of `people_count` people in turn, whose grades vary by item
    and by person."""
    from simia_web.accounts.services import user_create
    from simia_web.calibration.services import rating_save
    from simia_web.simulation.judge import CRITERIA, GRADES
    from tests.support.factories import conversation, make_trajectory, verdict

    rng = random.Random(7)
    people = [
        user_create(username=f"rater{i}", role="annotator", password="correct-horse-9") for i in range(people_count)
    ]
    for n in range(items):
        quality = rng.randrange(len(GRADES))
        judged = {c: GRADES[min(10, max(0, quality + rng.randint(-3, 3)))] for c in CRITERIA}
        trajectory = make_trajectory(
            domain="bench",
            messages=conversation(f"Please cancel order W{n}."),
            judge=verdict(passed=quality >= 7, score=GRADES[quality], scores=judged),
        )
        for k in range(raters):
            person = people[(n * raters + k) % len(people)]
            grades = {c: GRADES[min(10, max(0, quality + rng.randint(-2, 2)))] for c in CRITERIA}
            rating_save(trajectory_id=trajectory.pk, annotator=person, text_version=1, scores=grades)


def timed(call, loads: int) -> dict:
    """The first call's time and queries, and the median time and the queries of the calls after it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    seconds, queries = [], []
    for _ in range(loads):
        with CaptureQueriesContext(connection) as captured:
            started = time.perf_counter()
            call()
            seconds.append(time.perf_counter() - started)
        queries.append(len(captured))
    return {
        "first_s": round(seconds[0], 4),
        "first_queries": queries[0],
        "again_median_s": round(statistics.median(seconds[1:]), 4),
        "again_queries": max(queries[1:]),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--items", type=int, default=1000)
    parser.add_argument("--raters", type=int, default=2, help="People rating each item.")
    parser.add_argument("--people", type=int, default=20, help="Annotators sharing the items.")
    parser.add_argument("--loads", type=int, default=10, help="Calls of each figure and page.")
    args = parser.parse_args()

    from rollout_throughput import fresh_environment

    fresh_environment()
    from django.test import Client

    from simia_web.accounts.models import User
    from simia_web.calibration import selectors
    from simia_web.calibration.models import CriterionRating

    started = time.monotonic()
    rated_set(args.items, args.raters, args.people)
    ratings = CriterionRating.objects.count()
    print(f"{ratings} ratings of {args.items} items written in {time.monotonic() - started:.1f} s", flush=True)

    client = Client(HTTP_HOST="localhost")
    client.force_login(User.objects.get(username="rater0"))

    def page(path: str):
        def get():
            response = client.get(path)
            assert response.status_code == 200, response.status_code

        return get

    report: dict = {"ratings": ratings, "items": args.items, "people": args.people, "loads": args.loads}
    for name, call in (
        ("inter_annotator", selectors.inter_annotator_agreement),
        ("judge_against_people", selectors.verdicts_against_people),
        ("calibration_page", page("/calibration/")),
        ("agreement_panel", page("/calibration/agreement/")),
    ):
        report[name] = timed(call, args.loads)
        figures = report[name]
        print(
            f"{name}: first {figures['first_s'] * 1000:.1f} ms ({figures['first_queries']} queries), "
            f"again {figures['again_median_s'] * 1000:.1f} ms ({figures['again_queries']} queries)",
            flush=True,
        )
    print(json.dumps(report))


if __name__ == "__main__":
    main()
