"""A trajectory far larger than a page in Chromium: paged, cut with a Show more that shows one message whole,
the editor refusing it with the reason, and no Content-Security-Policy violation on the way."""

import pytest
from playwright.sync_api import expect

from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.browser


def test_show_more_and_the_editor_refusal(login):
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}:" + "z" * 10_000} for i in range(300)]
    t = make_trajectory(messages=messages, judge=verdict(passed=False, cited=[250]))
    page = login("annotator")
    violations = []
    page.on("console", lambda m: violations.append(m.text) if "Content Security Policy" in m.text else None)
    page.goto(f"/trajectories/{t.pk}/")
    expect(page.locator(".conversation .pager").first).to_contain_text("Page 1 of 6")
    expect(page.locator("article.msg")).to_have_count(50)
    page.locator("#m7 .show-more").click()
    page.wait_for_url("**full=7**")
    expect(page.locator("#m7 .text")).to_have_text(messages[7]["content"])
    expect(page.locator("#m7 .show-more")).to_have_count(0)
    page.locator("a[href$='#m250']").click()  # the judge's citation, on page 6
    expect(page.locator("#m250")).to_be_visible()
    page.wait_for_load_state("load")
    page.keyboard.press("e")
    page.wait_for_url(f"**/trajectories/{t.pk}/edit/**")
    expect(page.locator("#too-large-to-edit")).to_contain_text("too large to edit in the browser")
    assert violations == []
