"""Audits at a million trajectories on PostgreSQL: how long creating an audit takes (freezing 1M members and
drawing the sample, each strategy), and the audit page and GET /api/v1/audits/{id}/ with 1,000 decisions, over HTTP
through gunicorn as the README starts it (median and p95 of warm requests) with the queries each makes.

The data is bench/review_pages.py's (its loader, bench/review_data.py): DATABASE_URL's database is loaded up to
--rows trajectories when it holds fewer (kept for later runs). The audit covers every status (`status=all`), so
its population is every reviewable trajectory. The decisions are made through the review service, as the audit's
stream makes them, by a bench annotator.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_audit_1m python bench/audit_pages.py [--rows 1000000]

The machine's load average is printed: on a shared machine the times move with it.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(BENCH))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

from _pages_common import curator_session, web_server  # noqa: E402  (bench/ is on the path now)
from review_pages import SERVER, WARM_UP, _free_port, _get, django_setup  # noqa: E402

SAMPLE = 2_000
DECIDED = 1_000


def create_timed(strategy: str, actor):
    """Create an audit over every reviewable trajectory; prints its wall time and the CPU it took here and in
    PostgreSQL (what it costs whatever else the machine is doing)."""
    from copy_rows import PhaseClock

    from simia_web.audits.services import audit_create

    clock = PhaseClock()
    audit = audit_create(filters={"status": "all"}, sample_size=SAMPLE, strategy=strategy, seed=7, actor=actor)
    phase = clock.lap(f"audit_create {strategy}")
    database = "" if phase.database_cpu is None else f", {phase.database_cpu:.2f} s PostgreSQL"
    print(
        f"audit_create {strategy}: {phase.seconds:.2f} s for {audit.population:,} members "
        f"(CPU: {phase.python_cpu:.2f} s Python{database})",
        file=sys.stderr,
    )
    return audit


def decide(audit, annotator, n: int) -> None:
    """Decide the first `n` items of the sample (one in twelve rejected), as the stream would."""
    from simia_web.curation.models import Decision, Trajectory
    from simia_web.curation.services import review_decide

    ids = audit.items.order_by("position").values_list("trajectory_id", flat=True)[:n]
    for i, trajectory in enumerate(Trajectory.objects.filter(pk__in=list(ids)).only("pk", "version")):
        rejected = i % 12 == 0
        review_decide(
            trajectory=trajectory,
            reviewer=annotator,
            decision=Decision.REJECT if rejected else Decision.ACCEPT,
            expected_version=trajectory.version,
            reason="bench" if rejected else "",
        )


def queries_of(client, path: str) -> int:
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    with CaptureQueriesContext(connection) as captured:
        response = client.get(path)
    assert response.status_code == 200, (path, response.status_code)
    return len(captured)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=30, help="Timed requests per page.")
    args = parser.parse_args()
    django_setup()
    from review_data import load

    load(args.rows)
    from django.conf import settings
    from django.test import Client
    from django.test.utils import setup_test_environment

    from simia_web.accounts.models import User
    from simia_web.accounts.services import membership_set, workspace_default, workspace_switch

    workspace = workspace_default()  # where the loader's rows are
    people = {}
    for username, role in (("bench-curator", "curator"), ("bench-auditor", "annotator")):
        user, _ = User.objects.get_or_create(username=username)
        membership_set(workspace=workspace, user=user, role=role)
        people[role] = workspace_switch(user=user, workspace=workspace)
    curator, annotator = people["curator"], people["annotator"]
    created = {}
    for strategy in ("uniform", "active"):
        created[strategy] = create_timed(strategy, curator)
    audit = created["active"]
    started = time.perf_counter()
    decide(audit, annotator, DECIDED)
    print(f"{DECIDED} decisions made in {time.perf_counter() - started:.1f} s", file=sys.stderr)

    settings.ALLOWED_HOSTS = ["testserver", *settings.ALLOWED_HOSTS]
    setup_test_environment()
    client = Client()
    client.force_login(curator)
    pages = [("audit page", f"/audits/{audit.pk}/"), ("GET /api/v1/audits/{id}/", f"/api/v1/audits/{audit.pk}/")]
    queries = {label: queries_of(client, path) for label, path in pages}

    import httpx

    os.environ.update(SERVER)
    port = _free_port()
    load_before = os.getloadavg()[0]
    server = web_server("", port)
    try:
        http = httpx.Client(base_url=f"http://127.0.0.1:{port}", cookies={"sessionid": curator_session(curator)})
        times: dict[str, list[float]] = {label: [] for label, _ in pages}
        for _ in range(WARM_UP):
            for _, path in pages:
                _get(http, path)
        for _ in range(args.repeats):
            for label, path in pages:
                times[label].append(_get(http, path))
    finally:
        server.terminate()
        server.wait(30)
    load_average = (load_before + os.getloadavg()[0]) / 2
    print(
        f"\n{audit.population:,} members, {audit.sample_size:,} sampled, {DECIDED:,} decided; load average "
        f"{load_average:.1f} on {os.cpu_count()} CPUs\n"
    )
    print("| request | median ms | p95 ms | queries |\n|---|---|---|---|")
    for label, _ in pages:
        values = sorted(times[label])
        p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
        print(f"| {label} | {statistics.median(values):.1f} | {p95:.1f} | {queries[label]} |")


if __name__ == "__main__":
    main()
