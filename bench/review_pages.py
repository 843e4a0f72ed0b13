"""Review pages at 100k trajectories on PostgreSQL: median and p95 of 20 warm requests, and queries per page.

Loads (once; kept for later runs) 100k trajectories of about ten messages in six domains, with mixed statuses,
judge verdicts, rule violations and reviews, then requests each page of the review workspace through Django's
test client (the whole view: filters, queries and template rendering; no network).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_h4_bench python bench/review_pages.py [--rows 100000]
"""

import argparse
import importlib
import os
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

DOMAINS = ["retail", "airline", "banking", "calendar", "telecom", "travel"]
WORDS = [
    "order",
    "refund",
    "shipment",
    "address",
    "invoice",
    "booking",
    "flight",
    "seat",
    "account",
    "balance",
    "transfer",
    "meeting",
    "invite",
    "plan",
    "roaming",
    "hotel",
    "cancel",
    "change",
    "upgrade",
    "payment",
    "card",
    "delivery",
    "warranty",
    "return",
    "exchange",
    "baggage",
]
STATUSES = ["generated", "rules_failed", "judged_pass", "judged_fail", "accepted", "rejected"]
STATUS_WEIGHTS = [5, 8, 35, 22, 20, 10]
SEARCH_TERM = "zeppelin"  # in one conversation in a hundred
REPEATS = 20


def _setup():
    import django

    django.setup()
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("This benchmark needs PostgreSQL: set DATABASE_URL=postgres://...")


def _tools(domain: str) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"{domain}_{verb}",
                "description": f"{verb} a {domain} record",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            },
        }
        for verb in ("get", "update", "cancel")
    ]


def _messages(rng: random.Random, domain: str, i: int) -> list[dict]:
    def sentence(n=14):
        return " ".join(rng.choice(WORDS) for _ in range(n))

    messages = [
        {"role": "system", "content": f"You are a {domain} agent. Follow the policy. " + sentence(30)},
        {"role": "user", "content": f"Hello, about {domain} item {i}: " + sentence()},
    ]
    for k in range(2):
        call_id = f"call_{i}_{k}"
        messages.append(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": f"{domain}_get", "arguments": f'{{"id": "{domain[0].upper()}{i}"}}'},
                    }
                ],
            }
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f'{{"status": "{rng.choice(WORDS)}"}}'})
        messages.append({"role": "assistant", "content": sentence()})
        messages.append({"role": "user", "content": sentence(10)})
    messages.append({"role": "assistant", "content": "Done. " + sentence()})
    return messages


def load(rows: int) -> None:
    from django.contrib.contenttypes.models import ContentType  # noqa: F401  (app registry ready)
    from django.db import connection

    from simia_web.accounts.models import User
    from simia_web.catalog.services import domain_ensure
    from simia_web.curation.models import JudgeVerdict, Review, RuleViolation, Trajectory
    from simia_web.curation.services import conversation_summary

    have = Trajectory.objects.count()
    if have >= rows:
        print(f"{have} trajectories already loaded")
        return
    migration = importlib.import_module("simia_web.curation.migrations.0003_review_workspace")
    with connection.schema_editor() as editor:  # build the search index once, after the load
        migration.search_index_drop(None, editor)
    rng = random.Random(7)
    domains = {name: domain_ensure(name=name) for name in DOMAINS}
    reviewers = [
        User.objects.get_or_create(username=f"bench-annotator-{k}", defaults={"role": "annotator"})[0] for k in range(4)
    ]
    started = time.perf_counter()
    batch = 2000
    for start in range(have, rows, batch):
        made = []
        for i in range(start, min(rows, start + batch)):
            name = DOMAINS[i % len(DOMAINS)]
            messages = _messages(rng, name, i)
            if i % 100 == 0:
                messages[1]["content"] += f" and the {SEARCH_TERM}"
            status = rng.choices(STATUSES, STATUS_WEIGHTS)[0]
            passed = None if status == "generated" else (status in ("judged_pass", "accepted")) ^ (rng.random() < 0.15)
            score = round(rng.uniform(0.6, 1.0) if passed else rng.uniform(0.0, 0.7), 2) if passed is not None else None
            made.append(
                Trajectory(
                    kind="rollout",
                    domain=domains[name],
                    status=status,
                    messages=messages,
                    tools=_tools(name),
                    judge_passed=passed,
                    judge_score=score,
                    judge_confidence=round(rng.uniform(0.3, 1.0), 2) if passed is not None else None,
                    violation_count=1 if status == "rules_failed" else 0,
                    model="bench-model",
                    provenance={"model": "bench-model", "stage": "rollout"},
                    **conversation_summary(messages=messages),
                )
            )
        Trajectory.objects.bulk_create(made)
        RuleViolation.objects.bulk_create(
            RuleViolation(trajectory=t, code="unknown_tool", message_index=2, detail="no tool named x")
            for t in made
            if t.status == "rules_failed"
        )
        JudgeVerdict.objects.bulk_create(
            JudgeVerdict(trajectory=t, passed=t.judge_passed, score=t.judge_score, confidence=t.judge_confidence)
            for t in made
            if t.judge_passed is not None
        )
        Review.objects.bulk_create(
            Review(
                trajectory=t,
                reviewer=reviewers[t.pk % len(reviewers)],
                decision="accept" if t.status == "accepted" else "reject",
                reason="" if t.status == "accepted" else "wrong",
                trajectory_version=1,
                bulk=t.pk % 5 == 0,
            )
            for t in made
            if t.status in ("accepted", "rejected")
        )
        print(f"\r{min(rows, start + batch)} / {rows} loaded", end="", file=sys.stderr, flush=True)
    print(f"\nloaded in {time.perf_counter() - started:.0f} s; building the search index", file=sys.stderr)
    with connection.schema_editor() as editor:
        migration.search_index_create(None, editor)
    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE curation_trajectory")
        cursor.execute("ANALYZE curation_review")
        cursor.execute("ANALYZE curation_judgeverdict")


def measure(client, url: str) -> tuple[float, float, int, int]:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    for _ in range(3):  # warm up
        response = client.get(url)
        assert response.status_code == 200, (url, response.status_code)
    times = []
    for _ in range(REPEATS):
        with CaptureQueriesContext(connection) as queries:
            started = time.perf_counter()
            response = client.get(url)
            times.append((time.perf_counter() - started) * 1000)
    times.sort()
    return statistics.median(times), times[int(0.95 * (len(times) - 1))], len(queries), len(response.content)


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args()
    _setup()
    from django.conf import settings
    from django.test import Client
    from django.test.utils import setup_test_environment

    from simia_web.accounts.models import User
    from simia_web.curation.filters import PENDING
    from simia_web.curation.models import Trajectory
    from simia_web.curation.selectors.queue import queue_ordered

    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    setup_test_environment()
    load(args.rows)
    user, _ = User.objects.get_or_create(username="bench-curator", defaults={"role": "curator"})
    client = Client()
    client.force_login(user)
    pending = queue_ordered(
        Trajectory.objects.filter(
            status__in=["generated", "rules_failed", "judged_pass", "judged_fail"], reviewable=True
        )
    )
    count = pending.count()
    last_page = -(-count // 50)
    middle = pending.values_list("pk", flat=True)[count // 2]
    any_id = Trajectory.objects.order_by("-id").values_list("pk", flat=True).first()
    rows = [
        ("queue, page 1", "/review/"),
        ("queue, page 100 (jump)", "/review/?page=100"),
        (
            "queue, next page from page 100",
            f"/review/?after={pending.values_list('pk', flat=True)[99 * 50 - 1]}&page=100",
        ),
        (f"queue, last page ({last_page})", f"/review/?page={last_page}"),
        ("filter domain + verdict", "/review/?domain=banking&verdict=fail"),
        (f"text search ({SEARCH_TERM!r}, 1 in 100)", f"/review/?q={SEARCH_TERM}"),
        ("text search ('refund', in most)", "/review/?q=refund"),
        ("queue sorted by turns, page 1", "/review/?sort=-turns"),
        ("one trajectory page (mid-queue)", f"/trajectories/{middle}/"),
        ("REST list", "/api/v1/trajectories/"),
        ("REST detail", f"/api/v1/trajectories/{any_id}/"),
    ]
    total = Trajectory.objects.count()
    print(f"{total} trajectories, {count} pending ({PENDING}); {REPEATS} warm requests each\n")
    print(f"{'page':<40} {'median ms':>10} {'p95 ms':>8} {'queries':>8} {'KiB':>6}")
    for label, url in rows:
        median, p95, queries, size = measure(client, url)
        print(f"{label:<40} {median:>10.1f} {p95:>8.1f} {queries:>8} {size / 1024:>6.0f}")


if __name__ == "__main__":
    main()
