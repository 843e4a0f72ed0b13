"""Rating on the review page in Chromium: the panel arrives by htmx, the criteria are reached by their labels, a
save swaps the panel in place (CSRF header from the page), and keys typed into the panel do not decide the item."""

import pytest
from playwright.sync_api import expect

from simia_web.calibration.models import CriterionRating
from simia_web.curation.models import Review
from tests.support.factories import make_trajectory

pytestmark = pytest.mark.browser


def test_an_annotator_rates_each_criterion_and_labels_a_message_on_the_review_page(login):
    trajectory = make_trajectory()
    page = login("annotator")
    page.goto(f"/trajectories/{trajectory.pk}/")
    page.get_by_text("Your ratings per criterion").click()  # the ratings fold away until asked for

    page.get_by_label("task_completed").select_option("0.4")
    page.get_by_label("policy_followed").select_option("1.0")
    comment = page.get_by_label("Comment", exact=True)
    comment.fill("a r e: typed keys stay in the field")
    page.get_by_label("Message #").fill("2")
    page.get_by_label("Wrong tool called").check()
    page.get_by_label("Comment on this message").fill("Should have looked the order up first.")
    page.get_by_role("button", name="Save ratings of version 1").click()

    expect(page.locator("#rating-saved")).to_be_visible()
    rating = CriterionRating.objects.get()
    assert rating.scores == {"task_completed": 0.4, "policy_followed": 1.0} and rating.trajectory_version == 1
    label = rating.message_labels.get()
    assert (label.message_index, label.error_types) == (2, ["wrong_tool"])
    assert not Review.objects.exists()  # "a" and "r" typed in the comment did not accept or reject
    # The swapped panel shows what was saved, and keeps a blank row for another message.
    expect(page.get_by_label("task_completed")).to_have_value("0.4")
    expect(page.locator("#label-1-index")).to_have_value("")
