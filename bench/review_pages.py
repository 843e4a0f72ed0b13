"""Review pages at 100k and 1M trajectories on PostgreSQL, side by side: median and p95 of warm requests over HTTP,
and the queries each page makes.

For each size, a database of its own (named after DATABASE_URL's, `simia_100k`, `simia_1m`) is created, migrated
and loaded with bench/review_data.py (COPY; kept for later runs, and a larger size resumes from what is there).
Then gunicorn serves it as the README starts it (2 worker processes x 8 threads here), and a signed-in curator
requests each page one at a time: 3 warm-up requests, then --repeats timed ones. Queries per page are counted in
this process through Django's test client (the same view, no network).

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia python bench/review_pages.py [--sizes 100000,1000000]
    DATABASE_URL=... python bench/review_pages.py --rows 1000000 --load-only   # load DATABASE_URL's database only
    DATABASE_URL=... python bench/review_pages.py --rows 100000                # measure DATABASE_URL's database

The machine's load average is printed with each size: on a shared machine the medians move with it.
"""

import argparse
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

WARM_UP = 3
SERVER = {"SIMIA_WEB_WORKERS": "2", "SIMIA_WEB_THREADS": "8"}


def _setup():
    from web_load import database_ensure

    database_ensure(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("This benchmark needs PostgreSQL: set DATABASE_URL=postgres://...")
    call_command("migrate", verbosity=0)


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


def pages(client) -> list[tuple[str, str]]:
    """(label, path) of every page measured, with ids taken from the loaded data."""
    from review_data import SEARCH_TERM

    from simia_web.curation.models import PENDING_STATUSES, Trajectory
    from simia_web.curation.selectors.queue import queue_ordered

    pending = queue_ordered(Trajectory.objects.filter(status__in=PENDING_STATUSES, reviewable=True))
    count = pending.count()
    last_page = -(-count // 50)
    ids = pending.values_list("pk", flat=True)
    middle = ids[count // 2]
    newest = Trajectory.objects.order_by("-id").values_list("pk", flat=True).first()
    rest_next = client.get("/api/v1/trajectories/").json()["next"].split("/api/v1/trajectories/", 1)[1]
    return [
        ("queue, page 1", "/review/"),
        ("queue, page 100 by offset", "/review/?page=100"),
        ("queue, next page after page 100", f"/review/?after={ids[99 * 50 - 1]}&page=101"),
        ("queue, a page near the end by offset", f"/review/?page={last_page - 1}"),
        ("queue, the last page", f"/review/?page={last_page}"),
        ("queue filtered by status and domain", "/review/?status=judged_fail&domain=banking"),
        ("queue filtered by domain and verdict", "/review/?domain=banking&verdict=fail"),
        (f"text search, 1 in 100 ({SEARCH_TERM!r})", f"/review/?q={SEARCH_TERM}"),
        ("text search, in most ('refund')", "/review/?q=refund"),
        ("queue sorted by score", "/review/?sort=score"),
        ("queue sorted by score, descending", "/review/?sort=-score"),
        *((f"queue sorted by {name}", f"/review/?sort=-{name}") for name in ("turns", "tools", "rules")),
        *((f"queue sorted by {name}", f"/review/?sort={name}") for name in ("domain", "model")),
        ("one trajectory's page (mid-queue)", f"/trajectories/{middle}/"),
        ("dashboard", "/"),
        ("agreement page", "/agreement/"),
        ("REST list", "/api/v1/trajectories/"),
        ("REST next page", f"/api/v1/trajectories/{rest_next}"),
        ("REST detail", f"/api/v1/trajectories/{newest}/"),
    ]


def queries_of(client, path: str) -> tuple[int, int]:
    """Queries one request of the page makes, and its size in bytes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(queries), len(response.content)


def timed(http, path: str, repeats: int) -> list[float]:
    for _ in range(WARM_UP):
        response = http.get(path)
        assert response.status_code == 200, (path, response.status_code)
    times = []
    for _ in range(repeats):
        started = time.perf_counter()
        response = http.get(path)
        times.append((time.perf_counter() - started) * 1000)
        assert response.status_code == 200, (path, response.status_code)
    return sorted(times)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def measure(repeats: int) -> dict:
    """Every page of this database over HTTP (gunicorn) and through the test client (queries)."""
    import httpx
    from django.conf import settings
    from django.test import Client
    from django.test.utils import setup_test_environment
    from web_load import web_server

    from simia_web.accounts.models import User
    from simia_web.curation.models import Trajectory

    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    setup_test_environment()
    user, _ = User.objects.get_or_create(username="bench-curator", defaults={"role": "curator"})
    client = Client()
    client.force_login(user)
    measured = pages(client)
    port = _free_port()
    os.environ.update(SERVER)
    server = web_server("-c gunicorn.conf.py", port)
    rows = []
    try:
        with httpx.Client(
            base_url=f"http://127.0.0.1:{port}", cookies={"sessionid": curator_session(user)}, timeout=600
        ) as http:
            for label, path in measured:
                times = timed(http, path, repeats)
                queries, size = queries_of(client, path)
                rows.append(
                    {
                        "page": label,
                        "path": path,
                        "median_ms": statistics.median(times),
                        "p95_ms": times[math.ceil(0.95 * len(times)) - 1],  # nearest rank
                        "queries": queries,
                        "kib": size / 1024,
                    }
                )
                print(f"  {label}: {rows[-1]['median_ms']:.0f} ms", file=sys.stderr, flush=True)
    finally:
        server.terminate()
        server.wait(timeout=60)
    return {"trajectories": Trajectory.objects.count(), "load_average": os.getloadavg()[0], "pages": rows}


def size_label(rows: int) -> str:
    return f"{rows // 1_000_000}m" if rows % 1_000_000 == 0 else f"{rows // 1000}k" if rows % 1000 == 0 else str(rows)


def print_one(result: dict) -> None:
    print(f"{result['trajectories']:,} trajectories; load average {result['load_average']:.1f}\n")
    print(f"{'page':<42} {'median ms':>10} {'p95 ms':>8} {'queries':>8} {'KiB':>6}")
    for row in result["pages"]:
        print(
            f"{row['page']:<42} {row['median_ms']:>10.1f} {row['p95_ms']:>8.1f} {row['queries']:>8} {row['kib']:>6.0f}"
        )


def print_side_by_side(sizes: list[int], results: list[dict]) -> None:
    labels = [size_label(rows) for rows in sizes]
    for label, result in zip(labels, results, strict=True):
        print(f"{label}: {result['trajectories']:,} trajectories, load average {result['load_average']:.1f}")
    head = "".join(f"{label + ' ms':>10}" for label in labels)
    queries = "".join(f"{'q ' + label:>8}" for label in labels)
    ratio = f"{labels[-1]}/{labels[0]}"
    print(f"\nmedian of the timed requests over HTTP; q: queries per page\n{'page':<42}{head}{ratio:>9}{queries}")
    for rows in zip(*(result["pages"] for result in results), strict=True):
        medians = "".join(f"{row['median_ms']:>10.1f}" for row in rows)
        counts = "".join(f"{row['queries']:>8}" for row in rows)
        print(f"{rows[0]['page']:<42}{medians}{rows[-1]['median_ms'] / rows[0]['median_ms']:>8.1f}x{counts}")


def size_database(url: str, rows: int) -> str:
    server, name = url.rsplit("/", 1)
    return f"{server}/{name}_{size_label(rows)}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, help="One size, in DATABASE_URL's own database.")
    parser.add_argument("--sizes", default="100000,1000000", help="Sizes side by side, a database each.")
    parser.add_argument("--load-only", action="store_true", help="Load the rows, measure nothing.")
    parser.add_argument("--repeats", type=int, default=15, help="Timed requests per page.")
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)  # internal: one size, as JSON
    args = parser.parse_args()
    if args.rows is None:
        sizes = [int(size) for size in args.sizes.split(",")]
        results = []
        for rows in sizes:
            env = {**os.environ, "DATABASE_URL": size_database(os.environ["DATABASE_URL"], rows)}
            command = [sys.executable, __file__, "--rows", str(rows), "--repeats", str(args.repeats)]
            child = subprocess.run(
                [*command, *(["--load-only"] if args.load_only else ["--json"])],
                env=env,
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            )
            if not args.load_only:
                results.append(json.loads(child.stdout.strip().splitlines()[-1]))
        if results:
            print_side_by_side(sizes, results)
        return
    _setup()
    from review_data import load

    load(args.rows)
    if args.load_only:
        return
    result = measure(args.repeats)
    if args.json:
        print(json.dumps(result))
    else:
        print_one(result)


if __name__ == "__main__":
    main()
