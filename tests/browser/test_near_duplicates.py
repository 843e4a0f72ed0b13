"""Near-duplicates in Chromium: from a trajectory's page to its cluster, keep one and reject the rest, then undo."""

import pytest
from playwright.sync_api import expect

from simia_web.curation.models import Trajectory
from tests.dedup.test_index import near, said, words
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.browser


def test_keep_one_of_a_cluster_from_the_trajectory_page_and_undo_it(login):
    text = words(40)
    head, second, third = (
        make_trajectory(messages=said(near(text, 5 + i) if i else text), judge=verdict(score=0.5 + i / 10))
        for i in range(3)
    )
    make_trajectory(messages=said(words(41)))
    page = login("curator")

    page.goto(f"/trajectories/{head.pk}/")
    expect(page.locator("#near-duplicates h2")).to_have_text("Near-duplicates (2)")
    page.click("#cluster-link")
    page.wait_for_url(f"**/review/duplicates/{head.pk}/")
    expect(page.locator(f"#keep-{head.pk}-{third.pk}")).to_be_checked()  # accepted first, else the highest score
    page.check(f"#keep-{head.pk}-{second.pk}")
    page.click("text=Keep the chosen one, reject the rest")

    expect(page.locator("#bulk-toast")).to_contain_text(f"Kept trajectory {second.pk}. 2 trajectories rejected.")
    statuses = dict(Trajectory.objects.values_list("pk", "status"))
    assert (statuses[head.pk], statuses[second.pk], statuses[third.pk]) == ("rejected", "judged_pass", "rejected")

    page.click("#undo-btn")
    page.wait_for_url(f"**/review/duplicates/{head.pk}/")
    expect(page.locator(".messages")).to_contain_text("Undone: 2 trajectories wait for review again.")
    assert not Trajectory.objects.filter(status="rejected").exists()
