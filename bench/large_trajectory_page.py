"""Size of the trajectory review page and its editor for trajectories within the import limits but far beyond
what a browser page can hold: bytes of HTML, SQL queries and peak Python memory per request.

Creates the trajectories inside a transaction that is rolled back, so nothing is left in the database.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench python manage.py migrate
    DATABASE_URL=postgres://postgres@127.0.0.1:5432/simia_bench python bench/large_trajectory_page.py
"""

import json
import os
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


class Rollback(Exception):
    pass


def main() -> None:
    import django

    django.setup()
    from django.db import connection, transaction
    from django.test import Client
    from django.test.utils import CaptureQueriesContext, setup_test_environment

    from simia_web.accounts.models import User
    from simia_web.catalog.services import domain_ensure
    from simia_web.curation.services import trajectory_create

    setup_test_environment()  # the test client's ALLOWED_HOSTS
    cases = {
        "5,000 messages of 10 kB": [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}:" + "z" * 10_000} for i in range(5000)
        ],
        "a 5 MB tool result": [
            {"role": "user", "content": "List every row."},
            {"role": "tool", "tool_call_id": "c1", "content": json.dumps({"rows": "y" * 5_000_000})},
        ],
    }
    try:
        with transaction.atomic():
            user = User.objects.create(username="bench-large-page", role="annotator")
            client = Client()
            client.force_login(user)
            domain = domain_ensure(name="bench-large-page")
            print(f"{'trajectory':<26} {'url':<10} {'status':>6} {'HTML bytes':>12} {'queries':>8} {'peak MB':>8}")
            for name, messages in cases.items():
                t = trajectory_create(violations=[], kind="rollout", domain=domain, messages=messages, tools=[])
                for label, url in [
                    ("page", f"/trajectories/{t.pk}/"),
                    ("last page", f"/trajectories/{t.pk}/?page=100"),
                    ("editor", f"/trajectories/{t.pk}/edit/"),
                ]:
                    tracemalloc.start()
                    with CaptureQueriesContext(connection) as queries:
                        response = client.get(url)
                    peak = tracemalloc.get_traced_memory()[1] / 2**20
                    tracemalloc.stop()
                    status, size = response.status_code, len(response.content)
                    print(f"{name:<26} {label:<10} {status:>6} {size:>12,} {len(queries):>8} {peak:>8.1f}")
            raise Rollback
    except Rollback:
        pass


if __name__ == "__main__":
    main()
