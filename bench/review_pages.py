"""Review pages at 100k and 1M trajectories on PostgreSQL, side by side: median and p95 of warm requests over HTTP,
and the queries each page makes.

For each size, a database of its own (named after DATABASE_URL's, `simia_100k`, `simia_1m`) is created, migrated
and loaded with bench/review_data.py (COPY; kept for later runs, and a run asking for more rows adds the rest).
Then gunicorn serves each as the README starts it (2 worker processes x 8 threads here), and a signed-in curator
requests each page one request at a time, the sizes taking turns so that both see the same load of the machine:
3 warm-up requests each, then --repeats timed ones. Queries per page are counted through Django's test client
(the same view, no network) in a process set up for that size's database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia python bench/review_pages.py [--sizes 100000,1000000]
    DATABASE_URL=... python bench/review_pages.py --rows 1000000 --load-only   # load DATABASE_URL's database only
    DATABASE_URL=... python bench/review_pages.py --rows 100000                # measure DATABASE_URL's database
    DATABASE_URL=... python bench/review_pages.py --workspaces 2               # two workspaces of half the rows
    DATABASE_URL=... python bench/review_pages.py --workspaces 2 --review-stage  # and the reviewer stage's pages

With --workspaces 2 each size's database (`simia_1m_2ws`) holds two workspaces of half its rows each, and the
curator belongs to the first only: every page then reads its own workspace's half among the other's rows.

The machine's load average is printed: on a shared machine the medians move with it.
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

from _pages_common import curator_session, database_ensure, web_server  # noqa: E402  (bench/ is on the path now)

WARM_UP = 3
SERVER = {"SIMIA_WEB_WORKERS": "2", "SIMIA_WEB_THREADS": "8"}


def django_setup():
    database_ensure(os.environ["DATABASE_URL"])
    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor != "postgresql":
        sys.exit("This benchmark needs PostgreSQL: set DATABASE_URL=postgres://...")
    call_command("migrate", verbosity=0)


def pages(client, workspace_id: int, review_stage: bool = False) -> list[tuple[str, str]]:
    """(label, path) of every page measured, with ids taken from the loaded data of the curator's workspace (and the
    reviewer stage's pages over review_data.review_stage_overlay's decisions when `review_stage`)."""
    from review_data import SEARCH_TERM

    from simia_web.accounts.scoping import scoped
    from simia_web.curation.models import PENDING_STATUSES, Trajectory
    from simia_web.curation.selectors.queue import queue_ordered

    theirs = scoped(Trajectory.objects.all(), [workspace_id])
    pending = queue_ordered(theirs.filter(status__in=PENDING_STATUSES, reviewable=True))
    count = pending.count()
    ids = pending.values_list("pk", flat=True)
    middle = ids[count // 2]
    newest = theirs.order_by("-id").values_list("pk", flat=True).first()
    rest_next = client.get("/api/v1/trajectories/").json()["next"].split("/api/v1/trajectories/", 1)[1]
    return [
        ("queue, page 1", "/review/"),
        ("queue, page 100 by offset", "/review/?page=100"),
        ("queue, next page after page 100", f"/review/?after={ids[99 * 50 - 1]}&page=101"),
        # The queue counts up to 10,000: its deepest numbered page is the 200th; further on, Next follows the keyset.
        ("queue, page 200 by offset (the deepest)", "/review/?page=200"),
        ("queue, next page deep in the queue", f"/review/?after={ids[count - 100]}&page=201"),
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
        *(review_stage_pages() if review_stage else []),
    ]


def review_stage_pages() -> list[tuple[str, str]]:
    from simia_web.accounts.models import User

    annotator = User.objects.get(username="bench-annotator-0").pk
    return [
        ("reviewer queue", "/review/second-look/"),
        ("an annotator's quality page", f"/review/annotators/{annotator}/"),
        ("an annotator's quality over REST", f"/api/v1/annotators/{annotator}/quality/"),
    ]


def queries_of(client, path: str) -> tuple[int, int]:
    """Queries one request of the page makes, and its size in bytes."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as queries:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(queries), len(response.content)


def survey(workspaces: int, review_stage: bool) -> dict:
    """What the timing needs from this database (run in the process set up for it): the pages with their queries
    and sizes (through the test client), a signed-in curator's session, and the row counts (all, and the
    curator's workspace's)."""
    from django.conf import settings
    from django.test import Client
    from django.test.utils import setup_test_environment
    from review_data import review_stage_overlay, workspace_slugs

    from simia_web.accounts.models import User, Workspace
    from simia_web.accounts.scoping import scoped
    from simia_web.accounts.services import membership_set, workspace_switch
    from simia_web.curation.models import Trajectory

    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    setup_test_environment()
    workspace = Workspace.objects.get(slug=workspace_slugs(workspaces)[0])
    if review_stage and review_stage_overlay(workspace.slug):
        print("reviewer stage and gold items laid over the loaded decisions", file=sys.stderr)
    user, _ = User.objects.get_or_create(username="bench-curator")
    membership_set(workspace=workspace, user=user, role="curator")
    user = workspace_switch(user=user, workspace=workspace)
    client = Client()
    client.force_login(user)
    measured = []
    for label, path in pages(client, workspace.pk, review_stage):
        queries, size = queries_of(client, path)
        measured.append({"page": label, "path": path, "queries": queries, "kib": size / 1024})
    return {
        "trajectories": Trajectory.objects.count(),
        "visible": scoped(Trajectory.objects.all(), [workspace.pk]).count(),
        "session": curator_session(user),
        "pages": measured,
    }


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _get(http, path: str) -> float:
    started = time.perf_counter()
    response = http.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return (time.perf_counter() - started) * 1000


def timed(surveys: list[dict], databases: list[str], repeats: int) -> None:
    """Time every page of every size over HTTP, one gunicorn per database: the sizes take turns request by
    request, so each page's medians at every size are taken under the same load of the machine. Fills each page's
    median_ms and p95_ms."""
    import httpx

    os.environ.update(SERVER)
    servers, clients = [], []
    try:
        for survey_, database in zip(surveys, databases, strict=True):
            os.environ["DATABASE_URL"], port = database, _free_port()
            servers.append(web_server("-c gunicorn.conf.py", port))
            cookies = {"sessionid": survey_["session"]}
            clients.append(httpx.Client(base_url=f"http://127.0.0.1:{port}", cookies=cookies, timeout=600))
        for rows in zip(*(survey_["pages"] for survey_ in surveys), strict=True):
            for _ in range(WARM_UP):
                for http, row in zip(clients, rows, strict=True):
                    _get(http, row["path"])
            times = [[] for _ in rows]
            for _ in range(repeats):
                for http, row, kept in zip(clients, rows, times, strict=True):
                    kept.append(_get(http, row["path"]))
            for row, kept in zip(rows, times, strict=True):
                kept.sort()
                row["median_ms"] = statistics.median(kept)
                row["p95_ms"] = kept[math.ceil(0.95 * len(kept)) - 1]  # nearest rank
            medians = ", ".join(f"{row['median_ms']:.0f}" for row in rows)
            print(f"  {rows[0]['page']}: {medians} ms", file=sys.stderr, flush=True)
    finally:
        for http in clients:
            http.close()
        for server in servers:
            server.terminate()
            server.wait(timeout=60)


def size_label(rows: int) -> str:
    return f"{rows // 1_000_000}m" if rows % 1_000_000 == 0 else f"{rows // 1000}k" if rows % 1000 == 0 else str(rows)


def print_table(labels: list[str], surveys: list[dict], load_average: float) -> None:
    sizes = ", ".join(
        f"{label}: {survey_['trajectories']:,} ({survey_['visible']:,} in the curator's workspace)"
        for label, survey_ in zip(labels, surveys, strict=True)
    )
    print(f"trajectories {sizes}; load average {load_average:.1f} during the run")
    head = "".join(f"{label + ' ms':>10}{label + ' p95':>10}" for label in labels)
    queries = "".join(f"{'q ' + label:>8}" for label in labels)
    ratio = f"{labels[-1]}/{labels[0]}" if len(labels) > 1 else ""
    print("\nmedian and p95 of the timed requests over HTTP; q: queries per page")
    print(f"{'page':<42}{head}{ratio:>9}{queries}")
    for rows in zip(*(survey_["pages"] for survey_ in surveys), strict=True):
        times = "".join(f"{row['median_ms']:>10.1f}{row['p95_ms']:>10.1f}" for row in rows)
        counts = "".join(f"{row['queries']:>8}" for row in rows)
        factor = f"{rows[-1]['median_ms'] / rows[0]['median_ms']:>8.1f}x" if len(rows) > 1 else ""
        print(f"{rows[0]['page']:<42}{times}{factor}{counts}")


def size_database(url: str, rows: int, workspaces: int) -> str:
    server, name = url.rsplit("/", 1)
    layout = f"_{workspaces}ws" if workspaces > 1 else ""
    return f"{server}/{name}_{size_label(rows)}{layout}"


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, help="One size, in DATABASE_URL's own database.")
    parser.add_argument("--sizes", default="100000,1000000", help="Sizes side by side, a database each.")
    parser.add_argument("--load-only", action="store_true", help="Load the rows, measure nothing.")
    parser.add_argument("--workspaces", type=int, default=1, help="Workspaces the rows are split between.")
    parser.add_argument(
        "--review-stage",
        action="store_true",
        help="Lay the reviewer stage and gold items over the loaded decisions, and time their pages too.",
    )
    parser.add_argument("--repeats", type=int, default=15, help="Timed requests per page and size.")
    parser.add_argument("--survey", action="store_true", help=argparse.SUPPRESS)  # internal: load, survey, JSON
    args = parser.parse_args()
    if args.rows and (args.survey or args.load_only):
        django_setup()
        from review_data import load

        load(args.rows, args.workspaces)
        if args.survey:
            print(json.dumps(survey(args.workspaces, args.review_stage)))
        return
    sizes = [args.rows] if args.rows else [int(size) for size in args.sizes.split(",")]
    url = os.environ["DATABASE_URL"]
    databases = [url] if args.rows else [size_database(url, rows, args.workspaces) for rows in sizes]
    surveys = []
    for rows, database in zip(sizes, databases, strict=True):  # each size set up in a process of its own
        child = subprocess.run(
            [
                *(sys.executable, __file__, "--rows", str(rows), "--workspaces", str(args.workspaces)),
                *(["--review-stage"] if args.review_stage else []),
                "--load-only" if args.load_only else "--survey",
            ],
            env={**os.environ, "DATABASE_URL": database},
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        if not args.load_only:
            surveys.append(json.loads(child.stdout.strip().splitlines()[-1]))
    if args.load_only:
        return
    started = os.getloadavg()[0]
    timed(surveys, databases, args.repeats)
    print_table([size_label(rows) for rows in sizes], surveys, (started + os.getloadavg()[0]) / 2)


if __name__ == "__main__":
    main()
