"""Near-duplicates in the review workspace: a trajectory's near-duplicates, the clusters list and a cluster's page,
and "keep one, reject the rest" through the bulk decision (holds, individual decisions and undo apply)."""

import re

from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import review_decide, trajectory_hold
from tests.dedup.test_index import near, said, words
from tests.support.factories import make_trajectory, verdict


def cluster(n: int = 3, seed: int = 20) -> list[Trajectory]:
    text = words(seed)
    return [
        make_trajectory(messages=said(near(text, 5 + i) if i else text), judge=verdict(score=0.5 + i / 10))
        for i in range(n)
    ]


def test_a_trajectorys_page_lists_its_near_duplicates_with_links(client_for):
    head, copy = cluster(2)
    unrelated = make_trajectory(messages=said(words(21)))
    page = client_for("annotator").get(f"/trajectories/{head.pk}/").content.decode()
    assert "Near-duplicates (1)" in page and f'href="/trajectories/{copy.pk}/"' in page
    assert f'href="/review/duplicates/{head.pk}/"' in page
    alone = client_for("annotator").get(f"/trajectories/{unrelated.pk}/").content.decode()
    assert "Near-duplicates (0)" in alone and "None in this workspace." in alone


def test_the_clusters_list_and_a_clusters_page_show_every_member_with_the_suggested_one_checked(client_for):
    members = cluster(3)
    make_trajectory(messages=said(words(22)))
    Trajectory.objects.filter(pk=members[2].pk).update(judge_score=0.95)
    client = client_for("annotator")
    for url in ("/review/duplicates/", f"/review/duplicates/{members[0].pk}/"):
        page = client.get(url).content.decode()
        assert "3 trajectories</span>" in page
        assert re.search(rf'value="{members[2].pk}" id="keep-\d+-\d+" aria-label="[^"]+" checked', page)
        assert "Keep the chosen one" not in page  # deciding is the curators'
    assert client.get("/review/duplicates/999999/").status_code == 404


def test_keep_one_rejects_the_rest_as_one_bulk_decision_and_undo_takes_it_back(client_for, users):
    head, second, third = cluster(3)
    review_decide(trajectory=third, reviewer=users["annotator"], decision="accept", expected_version=1)
    shown = [head.pk, second.pk, third.pk]
    data = {"keep": head.pk, "shown": shown, "next": "/review/duplicates/"}
    assert client_for("annotator").post(f"/review/duplicates/{head.pk}/keep/", data).status_code == 403

    client = client_for("curator")
    response = client.post(f"/review/duplicates/{head.pk}/keep/", data)
    assert response.status_code == 302 and response["Location"] == "/review/duplicates/"

    statuses = dict(Trajectory.objects.filter(pk__in=shown).values_list("pk", "status"))
    # The one kept waits as it was; the one a person accepted one by one stays accepted.
    assert statuses == {head.pk: "judged_pass", second.pk: "rejected", third.pk: "accepted"}
    review = Review.objects.get(trajectory=second)
    assert review.bulk and review.reason == f"near-duplicate of trajectory {head.pk}, which was kept"

    page = client.get("/review/duplicates/").content.decode()
    assert "Kept trajectory" in page and "1 trajectory rejected." in page and "decided" in page
    batch = re.search(r'name="batch" value="([^"]+)"', page).group(1)
    undone = client.post("/review/bulk/undo/", {"batch": batch, "next": "/review/duplicates/"})
    assert undone["Location"] == "/review/duplicates/"
    second.refresh_from_db()
    assert second.status == TrajectoryStatus.JUDGED_PASS


def test_keep_one_leaves_held_items_and_refuses_a_trajectory_outside_the_cluster(client_for, users):
    head, second, third = cluster(3)
    other = make_trajectory(messages=said(words(23)))
    trajectory_hold(trajectory=third, user=users["annotator"])
    client = client_for("curator")
    url = f"/review/duplicates/{head.pk}/keep/"

    response = client.post(url, {"keep": other.pk, "shown": [head.pk, second.pk]}, follow=True)
    assert "is not in this cluster" in response.content.decode()
    assert not Review.objects.exists()

    response = client.post(url, {"keep": second.pk, "shown": [head.pk, second.pk, third.pk, other.pk]}, follow=True)
    assert "1 skipped: someone is reviewing it right now." in response.content.decode()
    statuses = dict(Trajectory.objects.values_list("pk", "status"))
    assert statuses[head.pk] == "rejected" and statuses[second.pk] != "rejected"
    assert statuses[third.pk] != "rejected" and statuses[other.pk] != "rejected"  # held; not in the cluster


def test_near_duplicate_pages_need_a_login(client):
    response = client.get("/review/duplicates/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
