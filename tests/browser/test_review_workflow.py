"""The review workflow in Chromium: an annotator opens the guidelines by key beside an item and decides it where the
reviewer stage is on; a reviewer confirms one decision and overturns another (with a reason) by keyboard from the
reviewer queue; the annotator reads the reason. A curator marks a gold item on its page, and the annotator learns it
only once they have decided it; annotators' split votes wait first in the reviewer queue for the reviewer to decide.
axe-core finds no serious or critical violation on the new pages,
which fit a 390 px screen."""

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import user_create, workspace_review_stage_set
from simia_web.catalog.guidelines import guidelines_save
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import review_decide
from tests.conftest import PASSWORD
from tests.support.factories import assign_to_vote, make_trajectory, verdict

pytestmark = pytest.mark.browser
AXE = Axe()
PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 1, "is_mobile": True, "has_touch": True}


def _signed_in(browser, live_server, user, **options):
    context = browser.new_context(**(options or {"viewport": {"width": 1280, "height": 900}}), base_url=live_server.url)
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    return page


def _checked(page) -> None:
    """No serious or critical axe-core violation, and nothing scrolls sideways."""
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    found = [v["id"] for v in AXE.run(page).response["violations"] if v["impact"] in ("serious", "critical")]
    assert not found, (page.url, found)
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], (page.url, width)


def test_guidelines_by_key_and_the_reviewer_confirms_and_overturns_by_keyboard(browser, live_server, users):
    workspace = Workspace.objects.get(slug="default")
    workspace_review_stage_set(workspace=workspace, on=True, actor=users["admin"])
    guidelines_save(
        workspace_id=workspace.pk,
        domain=None,
        text="## Refunds\nRefund **only** to the original card.",
        expected_version=0,
        actor=users["curator"],
    )
    first, second = (make_trajectory(judge=verdict(passed=True)) for _ in range(2))
    review_decide(trajectory=second, reviewer=users["annotator"], decision="accept", expected_version=1)

    # The annotator: g opens the guidelines beside the item; a decides it, and it awaits review.
    annotator = _signed_in(browser, live_server, users["annotator"])
    annotator.goto(f"/trajectories/{first.pk}/")
    panel = annotator.locator("#guidelines-panel")
    expect(panel).not_to_have_attribute("open", "")
    annotator.keyboard.press("g")
    expect(panel).to_have_attribute("open", "")
    expect(annotator.locator("#guidelines-text strong")).to_have_text("only")
    expect(annotator.locator("#guidelines-text")).to_be_focused()
    annotator.keyboard.press("g")
    expect(panel).not_to_have_attribute("open", "")
    annotator.keyboard.press("a")
    annotator.wait_for_url(lambda url: f"/trajectories/{first.pk}/" not in url)
    assert Trajectory.objects.get(pk=first.pk).status == TrajectoryStatus.AWAITING_REVIEW

    # The reviewer, by keyboard: s opens the queue's first item, c confirms, o overturns with a reason.
    reviewer = _signed_in(browser, live_server, users["reviewer"])
    reviewer.goto("/review/second-look/")
    _checked(reviewer)
    reviewer.keyboard.press("s")
    reviewer.wait_for_url("**/trajectories/*/?second_look=1")
    confirmed_id = int(reviewer.url.split("/trajectories/")[1].split("/")[0])
    expect(reviewer.locator("#second-look")).to_contain_text("Awaiting review")
    reviewer.keyboard.press("g")  # the guidelines beside the item, opened, are checked with the page
    expect(reviewer.locator("#guidelines-panel")).to_have_attribute("open", "")
    _checked(reviewer)
    reviewer.keyboard.press("c")
    reviewer.wait_for_url(lambda url: f"/trajectories/{confirmed_id}/" not in url and "second_look=1" in url)
    overturned_id = int(reviewer.url.split("/trajectories/")[1].split("/")[0])
    reviewer.keyboard.press("o")
    expect(reviewer.locator("#overturn-reason")).to_be_focused()
    reviewer.keyboard.type("Refunded to a new card, against the guidelines.")
    reviewer.keyboard.press("Enter")
    reviewer.wait_for_url("**/review/second-look/")
    expect(reviewer.locator("#reviewer-table")).to_contain_text("Nothing awaits review")
    assert {confirmed_id, overturned_id} == {first.pk, second.pk}
    assert Trajectory.objects.get(pk=confirmed_id).status == TrajectoryStatus.ACCEPTED
    assert Trajectory.objects.get(pk=overturned_id).status == TrajectoryStatus.REJECTED
    assert Review.objects.get(trajectory_id=overturned_id, reviewer=users["annotator"]).stage == "overturned"
    reviewer.context.close()
    annotator.context.close()

    # The annotator reads the reason on a phone; the guidelines page fits too.
    phone = _signed_in(browser, live_server, users["annotator"], **PHONE)
    phone.goto("/review/overturned/")
    expect(phone.locator("#overturned-table")).to_contain_text("against the guidelines")
    _checked(phone)
    phone.goto("/guidelines/")
    expect(phone.locator("#guidelines-current")).to_contain_text("original card")
    _checked(phone)
    phone.context.close()


def test_a_curator_marks_gold_the_annotator_learns_it_only_after_deciding_and_a_reviewer_settles_split_votes(
    browser, live_server, users
):
    gold_item = make_trajectory(judge=verdict(passed=True))
    voted = make_trajectory(judge=verdict(passed=True))
    second = user_create(username="annotator2", role="annotator", password=PASSWORD)
    assign_to_vote([voted.pk], [users["annotator"], second], rule="adjudicate")
    review_decide(trajectory=voted, reviewer=second, decision="accept", expected_version=1)

    # The curator marks the item gold, with an explanation and an expected rating, on its page.
    curator = _signed_in(browser, live_server, users["curator"])
    curator.goto(f"/trajectories/{gold_item.pk}/")
    curator.locator("#gold-card summary").click()
    curator.select_option("#gold-card select[name=expected_decision]", "reject")
    curator.fill("#gold-card textarea[name=explanation]", "The refund went to a new card.")
    curator.select_option("#gold-score-policy_followed", "0.2")
    curator.locator("#gold-card button[type=submit]").first.click()
    expect(curator.locator("#gold-card summary")).to_contain_text("expects reject")
    curator.context.close()

    # The annotator sees nothing of it until deciding; then the expected answer and why.
    annotator = _signed_in(browser, live_server, users["annotator"], **PHONE)
    annotator.goto(f"/trajectories/{gold_item.pk}/")
    expect(annotator.locator("body")).not_to_contain_text("new card")
    expect(annotator.locator("#gold-feedback")).to_have_count(0)
    annotator.keyboard.press("a")
    annotator.wait_for_url(lambda url: f"/trajectories/{gold_item.pk}/" not in url)
    annotator.goto(f"/trajectories/{gold_item.pk}/")
    expect(annotator.locator("#gold-expected")).to_have_text("reject")
    expect(annotator.locator("#gold-explanation")).to_contain_text("new card")
    _checked(annotator)
    # Their vote on the item decided by consensus differs from the other annotator's: it goes to the reviewer.
    annotator.goto(f"/trajectories/{voted.pk}/")
    annotator.fill("#reject-reason", "The order was never found.")
    annotator.locator("#reject-reason").press("Enter")
    annotator.wait_for_url(lambda url: f"/trajectories/{voted.pk}/" not in url)
    assert Trajectory.objects.get(pk=voted.pk).status == TrajectoryStatus.AWAITING_REVIEW
    annotator.context.close()

    # The reviewer opens the disagreement first in the queue and decides it by keyboard.
    reviewer = _signed_in(browser, live_server, users["reviewer"])
    reviewer.goto("/review/second-look/")
    expect(reviewer.locator("#reviewer-table")).to_contain_text("votes disagree")
    _checked(reviewer)
    reviewer.keyboard.press("s")
    reviewer.wait_for_url(f"**/trajectories/{voted.pk}/?second_look=1")
    expect(reviewer.locator("#dispute-votes")).to_contain_text("never found")
    _checked(reviewer)
    reviewer.keyboard.press("c")
    reviewer.wait_for_url("**/review/second-look/")
    assert Trajectory.objects.get(pk=voted.pk).status == TrajectoryStatus.REJECTED
    assert Review.objects.get(trajectory_id=voted.pk, stage="adjudicated").reviewer == users["annotator"]
    reviewer.context.close()
