"""The queue as it grows: every sort keeps keyset pages, counts stop at a bound and say so, text search reads the
stored vector (PostgreSQL) or the messages (SQLite) with the same answers, and a bulk decision over a large filter
runs as a job."""

from datetime import timedelta

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from simia_web.curation.models import PENDING_STATUSES, Review, Trajectory, TrajectoryStatus
from simia_web.curation.selectors import queue as queue_reads
from simia_web.curation.selectors.queue import QUEUE_SORTS, queue_ordered
from simia_web.curation.views import bulk as bulk_views
from simia_web.jobs.models import Job, JobStatus
from tests.curation.test_review import edit
from tests.support.factories import conversation, make_trajectory, verdict

SORTS = sorted(QUEUE_SORTS)


def _mixed(n: int) -> list[Trajectory]:
    made = []
    for i in range(n):
        judge = None if i % 7 == 0 else verdict(passed=i % 2 == 0, score=(i % 10) / 10, confidence=(i % 4) / 4)
        made.append(
            make_trajectory(
                domain=["shop", "bank", "air"][i % 3],
                judge=judge,
                violations=["unknown_tool"] if i % 5 == 0 else (),
                messages=conversation(answer="Done. " * (i % 3 + 1)),
            )
        )
    return made


def _page_queries(client, sort: str, after: int) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get("/review/", {"sort": sort, "after": after, "page": 2})
    assert response.status_code == 200
    return len(queries)


@pytest.mark.parametrize("sort", SORTS)
def test_every_sort_pages_by_keyset_in_its_order_whatever_the_rows(client_for, sort, settings):
    client = client_for("annotator")
    _mixed(8)
    small = _page_queries(client, sort, after=queue_ordered(Trajectory.objects.all(), sort).first().pk)
    _mixed(130)
    expected = list(
        queue_ordered(Trajectory.objects.filter(status__in=PENDING_STATUSES), sort).values_list("pk", flat=True)
    )
    first = client.get("/review/", {"sort": sort}).context["page"]
    second = client.get("/review/", {"sort": sort, "after": first.last_id, "page": 2}).context["page"]
    third = client.get("/review/", {"sort": sort, "after": second.last_id, "page": 3}).context["page"]
    assert [t.pk for t in first.rows + second.rows + third.rows] == expected
    assert _page_queries(client, sort, after=first.last_id) == small


def test_a_count_past_the_bound_is_labelled_and_so_is_a_place_past_it(client_for, monkeypatch):
    monkeypatch.setattr(queue_reads, "QUEUE_COUNT_LIMIT", 3)
    made = [make_trajectory(judge=verdict(passed=True, confidence=0.5)) for _ in range(6)]
    client = client_for("annotator")
    response = client.get("/review/")
    page = response.context["page"]
    assert (page.count, page.count_capped, len(page.rows)) == (3, True, 6)
    assert "3+ trajectories" in response.content.decode()
    oldest = min(t.pk for t in made)  # last in the queue: five ahead of it
    assert "past #3 in queue" in client.get(f"/trajectories/{oldest}/").content.decode()
    newest = max(t.pk for t in made)
    assert "#1 in queue" in client.get(f"/trajectories/{newest}/").content.decode()


def test_search_finds_rare_and_common_words_and_follows_edits(client_for):
    common = [make_trajectory(judge=verdict(), messages=conversation(f"Please refund order W{i}.")) for i in range(4)]
    rare = make_trajectory(judge=verdict(), messages=conversation("Please refund the zeppelin ticket."))
    client = client_for("annotator")

    def found(word, **params):
        return {t.pk for t in client.get("/review/", {"q": word, **params}).context["page"].rows}

    assert found("zeppelin") == {rare.pk}
    assert found("refund") == {rare.pk, *(t.pk for t in common)}
    # A change of the messages by any writer (a queryset update, a save, an edit) is searchable at once.
    Trajectory.objects.filter(pk=common[0].pk).update(messages=conversation("A zeppelin arrives."))
    common[1].messages = conversation("The zeppelin left.")
    common[1].save()
    Trajectory.objects.filter(pk=common[2].pk).update(status=TrajectoryStatus.JUDGED_FAIL)  # messages unchanged
    assert found("zeppelin") == {rare.pk, common[0].pk, common[1].pk}
    assert found("refund") == {rare.pk, common[2].pk, common[3].pk}
    edit(client, rare, **{"content-1": "Nothing about airships."})
    assert found("zeppelin", status="all") == {common[0].pk, common[1].pk}


def test_bulk_over_a_large_filter_is_a_job_with_the_bulk_rules(client_for, users, eager, monkeypatch):
    monkeypatch.setattr(bulk_views, "BULK_IN_REQUEST_MAX", 3)
    fails = [make_trajectory(judge=verdict(passed=False)) for _ in range(6)]
    careful, held = fails[0], fails[1]
    edit(client_for("annotator"), careful, **{"content-4": "a careful fix"})
    Trajectory.objects.filter(pk=held.pk).update(
        reserved_by=users["annotator"], reserved_until=timezone.now() + timedelta(minutes=5)
    )
    make_trajectory(judge=verdict(passed=True))  # outside the filter
    assert client_for("annotator").post("/review/bulk/", {"action": "accept", "scope": "all"}).status_code == 403
    client = client_for("curator")
    bulk = {"action": "reject", "scope": "all", "query": "verdict=fail&status=all", "reason": "bad"}
    confirm = client.post("/review/bulk/", bulk)
    assert confirm.status_code == 200 and "more than 3 trajectories?" in confirm.content.decode()
    assert not Job.objects.filter(kind="bulk-decision").exists()
    response = client.post("/review/bulk/", {**bulk, "confirmed": 4})
    job = Job.objects.get(kind="bulk-decision")
    assert response.status_code == 302 and response.url == f"/jobs/{job.pk}/"
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    rejected = set(Trajectory.objects.filter(status="rejected").values_list("pk", flat=True))
    assert rejected == {t.pk for t in fails[2:]}
    assert Trajectory.objects.get(pk=careful.pk).status == TrajectoryStatus.ACCEPTED
    reviews = Review.objects.filter(bulk=True)
    assert reviews.count() == 4 and len({r.batch for r in reviews}) == 1
    assert all(r.trajectory_version == r.based_on_version + 1 for r in reviews)
    summary = job.summary or {}
    assert {k: summary.get(k) for k in ("changed", "held", "decided")} == {"changed": 4, "held": 1, "decided": 1}
    page = client.get(f"/jobs/{job.pk}/")
    assert page.status_code == 200 and "Bulk decision" in page.content.decode()
