"""Real Chromium (Debian's build) driven by Playwright against pytest-django's live server."""

import os

import pytest

from tests.conftest import PASSWORD

# Playwright's sync API runs an event loop in this thread; the Django ORM calls made by the tests
# themselves are still plain synchronous code.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="session")
def browser():
    if not os.path.exists(CHROMIUM):
        pytest.skip("Chromium is not installed at /usr/bin/chromium")
    from playwright.sync_api import sync_playwright

    playwright = sync_playwright().start()
    browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    yield browser
    browser.close()
    playwright.stop()


@pytest.fixture
def page(browser, live_server, transactional_db):
    context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
    context.set_default_timeout(10_000)
    page = context.new_page()
    yield page
    context.close()


@pytest.fixture
def login(page, users):
    def as_role(role: str):
        page.goto("/accounts/login/")
        page.fill("input[name=username]", users[role].username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url("**/")
        return page

    return as_role


def bulk_over_the_filter(page, action: str, reason: str) -> None:
    """On the review queue page: ask for a bulk `action` over every item its filter matches, with `reason`."""
    page.select_option("#bulk-action", action)
    page.select_option("#bulk-scope", "all")
    page.fill(".bulkbar input[name=reason]", reason)
    page.click(".bulkbar button[type=submit]")
