"""The review loop in Chromium: the hold follows the annotator into the editor and back through an undo, a write
based on a stale view is refused naming who changed what, a draft survives a reload, and the keyboard path of
a fix (e, Alt+Down to the message, typing, Ctrl+Enter)."""

import pytest
from playwright.sync_api import expect

from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import review_decide
from tests.conftest import PASSWORD
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.browser


def _signed_in(browser, live_server, user):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
    context.set_default_timeout(10_000)
    page = context.new_page()
    page.goto("/accounts/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    return page


def _holder(trajectory) -> str | None:
    t = Trajectory.objects.select_related("reserved_by").get(pk=trajectory.pk)
    return t.reserved_by.username if t.reserved_by else None


def _settled_holder(page, trajectory) -> str | None:
    """The holder once the pages have sent what they send when left (a beacon may arrive a moment later)."""
    page.wait_for_timeout(300)
    return _holder(trajectory)


def test_the_hold_follows_the_annotator_into_the_editor_and_back_through_an_undo(browser, live_server, users):
    first = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    second = make_trajectory(judge=verdict(passed=False, confidence=0.6))
    third = make_trajectory(judge=verdict(passed=True))
    alice = _signed_in(browser, live_server, users["annotator"])
    bob = _signed_in(browser, live_server, users["curator"])

    alice.goto("/review/")
    alice.keyboard.press("s")
    expect(alice.locator("h1")).to_contain_text(f"Trajectory {first.pk}")
    alice.wait_for_load_state("load")
    alice.keyboard.press("e")  # the editor: the stream page does not let go of the item
    alice.wait_for_url(f"**/trajectories/{first.pk}/edit/**")
    alice.wait_for_load_state("load")
    assert _settled_holder(alice, first) == "annotator"

    bob.goto("/review/")
    bob.click("#start-reviewing")  # passes over the item Alice is editing
    expect(bob.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    bob.goto(f"/trajectories/{first.pk}/")
    expect(bob.locator("#accept-btn")).to_be_disabled()
    bob.keyboard.press("a")  # says why instead of doing nothing
    expect(bob.locator("#disabled-reason.flash")).to_contain_text("annotator is reviewing this item")
    bob.goto("/review/")
    bob.click("#start-reviewing")  # back to his own item
    expect(bob.locator("h1")).to_contain_text(f"Trajectory {second.pk}")

    # Alice's fix by keyboard: to the last message, type, save; the stream claims the next free item.
    for _ in range(4):
        alice.keyboard.press("Alt+ArrowDown")
    expect(alice.locator("textarea[name='content-4']")).to_be_focused()
    alice.keyboard.press("Control+a")
    alice.keyboard.type("Order W1 is cancelled; the refund follows.")
    alice.keyboard.press("Control+Enter")
    expect(alice.locator("h1")).to_contain_text(f"Trajectory {third.pk}")
    assert Trajectory.objects.get(pk=first.pk).status == TrajectoryStatus.ACCEPTED

    alice.keyboard.press("u")  # undo: back in the stream on that item, holding it again
    expect(alice.locator("h1")).to_contain_text(f"Trajectory {first.pk}")
    expect(alice.locator("#stream-bar")).to_be_visible()
    assert _settled_holder(alice, first) == "annotator" and _holder(third) is None
    restored = Trajectory.objects.get(pk=first.pk)
    assert (
        restored.status == TrajectoryStatus.JUDGED_FAIL and restored.messages[4]["content"] == "Order W1 is cancelled."
    )
    alice.keyboard.press("a")
    expect(alice.locator("h1")).to_contain_text(f"Trajectory {third.pk}")
    assert Trajectory.objects.get(pk=first.pk).status == TrajectoryStatus.ACCEPTED
    for page in (alice, bob):
        page.context.close()


def test_a_write_based_on_a_stale_view_is_refused_naming_who_changed_what(browser, live_server, users):
    t = make_trajectory(judge=verdict(passed=False))
    alice = _signed_in(browser, live_server, users["annotator"])
    alice.goto(f"/trajectories/{t.pk}/")  # viewing only: nobody holds it
    review_decide(trajectory=t, reviewer=users["curator"], decision="reject", reason="off-policy", expected_version=1)
    alice.keyboard.press("a")
    expect(alice.locator("#conflict")).to_contain_text("v2: rejected by curator")
    assert [r.decision for r in Review.objects.all()] == ["reject"]

    # In the editor: the hold Alice took lapsed while she typed, and the curator decided meanwhile.
    alice.goto(f"/trajectories/{t.pk}/edit/")
    alice.wait_for_load_state("networkidle")  # the editor has renewed its hold
    alice.locator("textarea[name='content-4']").fill("Alice's fix, typed on version 2")
    Trajectory.objects.filter(pk=t.pk).update(reserved_by=None, reserved_until=None)
    review_decide(trajectory=t, reviewer=users["curator"], decision="accept", expected_version=2)
    alice.click("#save-fix")
    expect(alice.locator("#conflict")).to_contain_text("v3: accepted by curator")
    expect(alice.locator("textarea[name='content-4']")).to_have_value("Alice's fix, typed on version 2")
    t.refresh_from_db()
    assert t.messages[4]["content"] == "Order W1 is cancelled." and t.status == TrajectoryStatus.ACCEPTED
    alice.context.close()


def test_a_draft_is_kept_as_you_type_and_restored_after_a_reload(login):
    t = make_trajectory(judge=verdict(passed=False))
    page = login("annotator")
    page.goto(f"/trajectories/{t.pk}/edit/")
    page.wait_for_load_state("load")
    field = page.locator("textarea[name='content-4']")
    field.click()
    page.keyboard.press("End")
    page.keyboard.type(" A refund follows in five days.")
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")

    # Leaving asks first: a nav link, then a reload.
    asked = []
    page.once("dialog", lambda dialog: (asked.append(dialog.type), dialog.dismiss()))
    page.click("nav a:has-text('Review')")
    page.wait_for_timeout(500)
    assert asked == ["beforeunload"] and "/edit/" in page.url
    page.once("dialog", lambda dialog: (asked.append(dialog.type), dialog.accept()))
    page.reload()
    expect(page.locator("#draft-restored")).to_contain_text("Restored your unsaved draft")
    expect(page.locator("textarea[name='content-4']")).to_have_value(
        "Order W1 is cancelled. A refund follows in five days."
    )
    assert asked == ["beforeunload", "beforeunload"]
    page.click("#save-fix")
    expect(page.locator(".messages")).to_contain_text(f"Trajectory {t.pk}: fix and accept")
    t.refresh_from_db()
    assert t.messages[4]["content"].endswith("five days.") and not t.drafts.exists()


class Keys:
    """The page's keyboard, counting the keys pressed (typing is counted apart)."""

    def __init__(self, page):
        self.page, self.pressed, self.typed = page, 0, 0

    def press(self, key: str, times: int = 1):
        for _ in range(times):
            self.page.keyboard.press(key)
            self.pressed += 1

    def type(self, text: str):
        self.page.keyboard.type(text)
        self.typed += len(text)


def test_keys_per_accepted_item_and_per_fix_in_the_stream(login):
    from tests.support.factories import conversation

    messages = conversation()
    for turn in range(4):  # a 13-message conversation; the fix is to its last message
        messages[-1:-1] = [{"role": "assistant", "content": "One moment."}, {"role": "user", "content": f"And {turn}?"}]
    first = make_trajectory(judge=verdict(passed=False, confidence=0.9), messages=messages)
    second = make_trajectory(judge=verdict(passed=False, confidence=0.5), messages=messages)
    third = make_trajectory(judge=verdict(passed=True))
    page = login("annotator")
    page.goto("/review/")
    page.click("#start-reviewing")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {first.pk}")
    page.wait_for_load_state("load")  # the page's keys listen from here on

    accept = Keys(page)
    accept.press("a")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    assert accept.pressed == 1

    fix = Keys(page)
    page.wait_for_load_state("load")
    fix.press("e")
    page.wait_for_url(f"**/trajectories/{second.pk}/edit/**")
    page.wait_for_load_state("load")
    fix.press("Alt+End")
    expect(page.locator(f"textarea[name='content-{len(messages) - 1}']")).to_be_focused()
    fix.press("Alt+ArrowUp", times=2)  # and back down to it, message by message
    fix.press("Alt+ArrowDown", times=2)
    fix.type(" Your refund follows.")
    fix.press("Control+Enter")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {third.pk}")
    fixed = Trajectory.objects.get(pk=second.pk)
    assert fixed.status == TrajectoryStatus.ACCEPTED and fixed.messages[-1]["content"].endswith("Your refund follows.")
    # e, Alt+End, Ctrl+Enter: three keys and the typing (the walk up and back is four more, to show the keys work).
    assert fix.pressed - 4 == 3
