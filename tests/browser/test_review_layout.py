"""The review page at 1280 px as an annotator meets it: the judge's verdict, criterion scores and reason in view
beside the conversation without scrolling, the ratings folded until asked for, and every state change opened by a
key."""

import pytest
from playwright.sync_api import expect

from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.browser


def test_the_judge_is_in_view_the_ratings_fold_and_s_opens_the_state_changes(login):
    trajectory = make_trajectory(judge=verdict(passed=False, score=0.3, rationale="Cancelled the wrong order."))
    page = login("annotator")
    page.goto(f"/trajectories/{trajectory.pk}/")

    judge = page.locator("#judge")
    expect(judge).to_contain_text("Cancelled the wrong order.")
    box = judge.bounding_box()
    assert box is not None and box["y"] + box["height"] <= page.viewport_size["height"]  # seen without scrolling
    expect(page.locator("#ratings-fold")).not_to_have_attribute("open", "")
    state = page.locator("details.state").first
    expect(state).not_to_have_attribute("open", "")
    page.keyboard.press("s")
    expect(state).to_have_attribute("open", "")
    page.keyboard.press("s")
    expect(state).not_to_have_attribute("open", "")
