"""A near-duplicate build split into ranges that workers sign in parallel, merged by one clustering unit, makes the
index the single-pass build (manage.py near_duplicates --resign, one range in one process) makes."""

import random

import pytest
from django.core.management import call_command
from django.db import connection

from simia_web.accounts.services import workspace_create
from simia_web.catalog.services import domain_ensure
from simia_web.core.errors import Conflict
from simia_web.curation.duplicates import TRAJECTORIES
from simia_web.curation.models import Trajectory
from simia_web.curation.services import conversation_summary
from simia_web.dedup.models import Band, Signature
from simia_web.dedup.selectors import index_ranges
from simia_web.dedup.services import index_build, index_build_queue, index_range_sign
from simia_web.jobs.models import Job, JobStatus
from tests.conftest import wait_for
from tests.dedup.test_index import near, said, words
from tests.support.factories import TOOLS


def _corpus(count: int, seed: int = 3) -> list[int]:
    """`count` trajectories written without their index (as a load or an upgrade leaves them), in two workspaces: a
    third are exact or near copies (or copies of copies) of a few dozen texts, some with no words at all."""
    rng = random.Random(seed)
    domains = [
        domain_ensure(name="shop"),
        domain_ensure(name="air", workspace_id=workspace_create(slug="team-b").pk),
    ]
    bases = [words(1000 + k, 60) for k in range(40)]
    rows = []
    for i in range(count):
        pick = rng.random()
        if pick < 0.01:
            messages = []
        elif pick < 0.35:
            base = rng.choice(bases)
            text = rng.choice([base, near(base, rng.randrange(60)), near(near(base, 3), rng.randrange(60))])
            messages = said(text)
        else:
            messages = said(words(10_000 + i, 30))
        rows.append(
            Trajectory(
                kind="rollout",
                domain=domains[i % 2],
                messages=messages,
                tools=TOOLS,
                **conversation_summary(messages=messages),
            )
        )
    return [row.pk for row in Trajectory.objects.bulk_create(rows, batch_size=1000)]


def _index() -> tuple[dict, set]:
    """The index as data: {item: (workspace, signature, cluster)} and {(band key, item)}."""
    signatures = Signature.objects.filter(corpus=TRAJECTORIES)
    rows = {
        item: (workspace, bytes(data), cluster)
        for item, workspace, data, cluster in signatures.values_list("item_id", "workspace_id", "minhash", "cluster")
    }
    bands = set(Band.objects.filter(signature__corpus=TRAJECTORIES).values_list("key", "signature__item_id"))
    return rows, bands


def test_ranges_cover_every_item_and_what_lies_beyond(db):
    ids = _corpus(25)
    ranges = index_ranges(corpus=TRAJECTORIES, items_per_range=10)
    assert [(r.low, r.high, r.items) for r in ranges] == [
        (None, ids[10], 10),
        (ids[10], ids[20], 10),
        (ids[20], None, 5),
    ]
    (whole,) = index_ranges(corpus=TRAJECTORIES, items_per_range=None)
    assert (whole.low, whole.high, whole.items) == (None, None, 25)


def test_a_second_build_of_a_corpus_waits_for_the_first(db):
    first = index_build_queue(corpus=TRAJECTORIES)
    with pytest.raises(Conflict, match=f"Job {first.pk} is building"):
        index_build_queue(corpus=TRAJECTORIES, resign=True)
    index_build_queue(corpus="task")  # another corpus's index is another's
    Job.objects.filter(pk=first.pk).update(status=JobStatus.SUCCEEDED)
    index_build_queue(corpus=TRAJECTORIES)


def test_a_range_written_again_leaves_the_index_as_it_was(db):
    _corpus(300)
    index_build(corpus=TRAJECTORIES, resign=True)
    before = _index()
    middle = index_ranges(corpus=TRAJECTORIES, items_per_range=100)[1]
    for _ in range(2):  # a unit redelivered after its worker died rewrites its own range; clusters wait for the merge
        index_range_sign(corpus=TRAJECTORIES, ids=middle, resign=True)()
        assert _index() == before


def test_a_build_leaves_the_planner_statistics_of_what_it_wrote(db):
    if connection.vendor != "postgresql":
        pytest.skip("ANALYZE and pg_class are PostgreSQL's")
    _corpus(120)
    index_build(corpus=TRAJECTORIES, resign=True)
    with connection.cursor() as cursor:  # reltuples is -1 until a table is first analyzed
        cursor.execute(
            "SELECT relname, reltuples FROM pg_class WHERE oid IN (%s::regclass, %s::regclass)",
            [Signature._meta.db_table, Band._meta.db_table],
        )
        counted = dict(cursor.fetchall())
    assert counted == {
        Signature._meta.db_table: Signature.objects.count(),
        Band._meta.db_table: Band.objects.count(),
    }


@pytest.mark.integration
def test_a_build_on_workers_in_ranges_equals_the_single_pass_build(celery_worker, settings, capsys, client_for):
    if not settings.CELERY_BROKER_URL.startswith("redis://") or connection.vendor != "postgresql":
        pytest.skip("set DATABASE_URL to PostgreSQL and CELERY_BROKER_URL to Redis (make test does)")
    celery_worker(concurrency=2)  # it starts while the single pass runs
    ids = _corpus(2000)
    call_command("near_duplicates", "--corpus", TRAJECTORIES, "--resign")  # the single pass, in this process
    single = _index()
    assert len(single[0]) > 1950 and sum(1 for row in single[0].values() if row[2] is not None) > 600
    assert len({row[0] for row in single[0].values()}) == 2  # both workspaces, never in one cluster
    capsys.readouterr()

    def built(job):
        job.refresh_from_db()
        return not job.is_active

    # From nothing, every text signed again by the workers, 8 ranges at a time of two.
    Signature.objects.filter(corpus=TRAJECTORIES).delete()
    job = index_build_queue(corpus=TRAJECTORIES, resign=True, items_per_range=250)
    wait_for(lambda: built(job), timeout=90, message="the parallel build")
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert job.units.filter(stage="sign").count() == 8 and job.units.filter(stage="cluster").count() == 1
    assert _index() == single
    assert job.summary["signed"] == 2000 and job.summary["signatures"] == len(single[0])
    page = client_for("admin").get(f"/jobs/{job.pk}/")
    assert page.status_code == 200 and "Near-duplicate index build" in page.text

    # From a damaged index: bands gone, clusters wrong, signatures missing, one of an item deleted since.
    Band.objects.all().delete()
    Signature.objects.filter(item_id__in=ids[::7]).delete()
    Signature.objects.filter(corpus=TRAJECTORIES).update(cluster=ids[5])
    gone = Trajectory.objects.get(pk=ids[-1])
    gone.delete()
    call_command("near_duplicates", "--corpus", TRAJECTORIES, "--queue", "--items-per-range", "700")
    assert '"dropped": 1' in capsys.readouterr().out
    single[0].pop(ids[-1], None)
    assert _index() == (single[0], {(key, item) for key, item in single[1] if item != ids[-1]})
    assert Job.objects.filter(kind="near-duplicates").count() == 2
