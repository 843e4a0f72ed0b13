"""The queue's search entries (PostgreSQL): the trigger keeps one per trajectory waiting for review, equal to its
row, through every kind of write; a rare word's search pages, counts and neighbours read them and answer exactly as
the trajectories do, in every sort; a common word, or a filter an entry does not carry, reads the trajectories."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.accounts.models import default_workspace_id
from simia_web.curation.models import PENDING_STATUSES, QueueSearchEntry, Trajectory, TrajectoryStatus
from simia_web.curation.selectors import queue as queue_selectors
from simia_web.curation.selectors.queue import QUEUE_SORTS
from tests.curation.test_review import decide, edit
from tests.support.factories import conversation, make_job, make_trajectory, verdict

pytestmark = pytest.mark.skipif(connection.vendor != "postgresql", reason="the entries' trigger is PostgreSQL's")

ENTRY_COLUMNS = [field.name for field in QueueSearchEntry._meta.fields]


def _entries_match_the_trajectories():
    waiting = Trajectory.objects.filter(status__in=PENDING_STATUSES, reviewable=True)
    assert list(QueueSearchEntry.objects.order_by("id").values_list(*ENTRY_COLUMNS)) == list(
        waiting.order_by("id").values_list(*ENTRY_COLUMNS)
    )


def _mixed(n: int, word: str = "zeppelin") -> list[Trajectory]:
    made = []
    for i in range(n):
        judge = None if i % 7 == 0 else verdict(passed=i % 2 == 0, score=(i % 10) / 10, confidence=(i % 4) / 4)
        said = f"Please refund the {word} ticket {i}." if i % 3 == 0 else f"Please refund order W{i}."
        made.append(
            make_trajectory(
                domain=["shop", "bank"][i % 2],
                judge=judge,
                violations=["unknown_tool"] if i % 5 == 0 else (),
                messages=conversation(said),
            )
        )
    return made


def test_the_trigger_keeps_one_entry_per_waiting_trajectory_through_every_write(client_for):
    made = _mixed(12)
    _entries_match_the_trajectories()
    assert QueueSearchEntry.objects.count() == 12
    client = client_for("annotator")
    decide(client, made[0], decision="accept")
    edit(client, made[6], **{"content-1": "A fixed answer."})
    Trajectory.objects.filter(pk=made[1].pk).update(messages=conversation("An airship instead."))
    Trajectory.objects.filter(pk=made[2].pk).update(reviewable=False)
    Trajectory.objects.filter(pk=made[3].pk).update(judge_score=0.05, judge_confidence=0.99)
    Trajectory.objects.filter(pk=made[4].pk).delete()
    Trajectory.objects.filter(pk=made[5].pk).update(status=TrajectoryStatus.REJECTED)
    Trajectory.objects.filter(pk=made[5].pk).update(status=TrajectoryStatus.JUDGED_FAIL)  # back in the queue
    _entries_match_the_trajectories()
    assert not QueueSearchEntry.objects.filter(pk__in=[made[0].pk, made[2].pk, made[4].pk]).exists()
    assert QueueSearchEntry.objects.filter(pk=made[1].pk, search_vector="airship").exists()


def _search(client, **params) -> list[int]:
    """Every id of a search, page after page by keyset."""
    found, after = [], None
    while True:
        page = client.get("/review/", {**params, **({"after": after} if after else {})}).context["page"]
        found += [t.pk for t in page.rows]
        if not page.has_next:
            return found
        after = page.last_id


@pytest.mark.parametrize("sort", sorted(QUEUE_SORTS))
def test_a_search_answers_the_same_from_entries_and_from_the_trajectories(client_for, monkeypatch, settings, sort):
    monkeypatch.setattr("simia_web.curation.views.queue.QUEUE_PAGE_SIZE", 5)
    _mixed(40)
    client = client_for("annotator")
    searches = [{"q": "zeppelin"}, {"q": "zeppelin", "domain": "bank", "verdict": "fail"}, {"q": "refund W1"}]
    for search in searches:
        monkeypatch.setattr(queue_selectors, "WALK_TO_FETCH", 0)  # the trajectories answer
        expected = _search(client, sort=sort, **search)
        response = client.get("/review/", {"sort": sort, "page": 2, **search})
        monkeypatch.setattr(queue_selectors, "WALK_TO_FETCH", 10**9)  # the entries answer
        assert _search(client, sort=sort, **search) == expected and expected
        again = client.get("/review/", {"sort": sort, "page": 2, **search})
        assert [t.pk for t in again.context["page"].rows] == [t.pk for t in response.context["page"].rows]
        assert again.context["page"].count == response.context["page"].count
        middle = expected[len(expected) // 2]
        for patched in (0, 10**9):
            monkeypatch.setattr(queue_selectors, "WALK_TO_FETCH", patched)
            page = client.get(f"/trajectories/{middle}/", {"sort": sort, **search}).content.decode()
            place = expected.index(middle)
            assert f"#{place + 1} in queue" in page
            assert f"/trajectories/{expected[place + 1]}/" in page if place + 1 < len(expected) else True


def test_entries_answer_only_a_search_of_the_waiting_items_with_filters_they_carry(rf, users):
    from django.http import QueryDict

    make_trajectory(job=make_job(), messages=conversation("A zeppelin."))

    def entries(query: str):
        request = rf.get("/review/")
        request.user = users["annotator"]
        default = [default_workspace_id()]
        filterset = queue_selectors.queue_filterset(params=QueryDict(query), request=request, workspace_ids=default)
        return queue_selectors.queue_search_entries(filterset, page_size=50, workspace_ids=default)

    assert entries("q=zeppelin&domain=shop&verdict=none&min_score=0") is not None
    assert entries("domain=shop") is None  # no words: the queue's own indexes
    assert entries("q=zeppelin&status=all") is None
    assert entries("q=zeppelin&job=1") is None


def test_a_rare_word_search_makes_the_same_queries_whatever_the_rows(client_for, monkeypatch):
    monkeypatch.setattr(queue_selectors, "WALK_TO_FETCH", 10**9)
    client = client_for("annotator")
    _mixed(6)

    def queries() -> int:
        with CaptureQueriesContext(connection) as captured:
            assert client.get("/review/", {"q": "zeppelin"}).status_code == 200
        return len(captured)

    few = queries()
    _mixed(60)
    assert queries() == few
