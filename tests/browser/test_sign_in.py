"""Single sign-on in Chromium against a real OpenID provider started by the test (oidc-provider-mock): the login
page's button, the provider's form, the way back; mapped roles, a removed group revoked, an unmapped user refused
with a page that says why; the new pages pass axe-core and fit 390 px."""

import json

import pytest
import requests
from oidc_provider_mock import run_server_in_thread
from playwright.sync_api import expect

from simia_web.accounts.models import Membership, User
from simia_web.accounts.services import workspace_create
from tests.browser.test_accessibility import PHONE, blocking_violations, fits_the_width, log_in

pytestmark = pytest.mark.browser

ROLE_MAP = {"annotators": ["default:annotator"], "ml-team": ["research:curator"]}


@pytest.fixture
def provider(settings):
    with run_server_in_thread(require_nonce=True) as server:
        url = f"http://localhost:{server.server_port}"
        settings.SIMIA_OIDC_ISSUER = url
        settings.SIMIA_OIDC_CLIENT_ID = "simia"
        settings.SIMIA_OIDC_CLIENT_SECRET = "s3cret"
        settings.SIMIA_OIDC_ROLE_MAP = json.dumps(ROLE_MAP)
        yield url


def _groups(provider: str, sub: str, username: str, groups: list[str]) -> None:
    claims = {"sub": sub, "preferred_username": username, "email": f"{username}@example.com", "groups": groups}
    requests.put(f"{provider}/users/{sub}", json=claims, timeout=5).raise_for_status()


def _sign_in(page, sub: str) -> None:
    page.goto("/accounts/login/")
    page.get_by_role("link", name="Sign in with your company account").click()
    page.fill("#subject-input", sub)
    page.get_by_role("button", name="Authorize", exact=True).click()


def test_sign_in_with_the_provider_roles_revocation_and_refusal(browser, live_server, provider, users):
    workspace_create(slug="research", name="Research")
    context = browser.new_context(base_url=live_server.url, **PHONE)
    page = context.new_page()
    page.goto("/accounts/login/")
    assert blocking_violations(page) == []
    fits_the_width(page)

    _groups(provider, "u-1", "alice", ["annotators", "ml-team"])
    _sign_in(page, "u-1")
    page.wait_for_url(f"{live_server.url}/")
    expect(page.locator(".who")).to_contain_text("alice")
    expect(page.locator("#workspace-choice option")).to_have_count(2)
    alice = User.objects.get(username="alice")
    assert dict(Membership.objects.filter(user=alice).values_list("workspace__slug", "role")) == {
        "default": "annotator",
        "research": "curator",
    }
    page.select_option("#workspace-choice", "research")
    page.get_by_role("button", name="Switch").click()
    expect(page.locator(".who")).to_contain_text("Curator")

    page.get_by_role("button", name="Log out").click()
    _groups(provider, "u-1", "alice", ["ml-team"])  # taken out of "annotators" at the provider
    _sign_in(page, "u-1")
    page.wait_for_url(f"{live_server.url}/")
    assert list(Membership.objects.filter(user=alice).values_list("workspace__slug", flat=True)) == ["research"]
    expect(page.locator("#workspace-choice")).to_have_count(0)  # one workspace left: shown, not chosen

    page.get_by_role("button", name="Log out").click()
    _groups(provider, "u-2", "bob", ["marketing"])
    _sign_in(page, "u-2")
    expect(page.get_by_role("heading", name="Sign-in refused")).to_be_visible()
    expect(page.get_by_role("alert")).to_contain_text("in no group that gives access")
    assert not User.objects.filter(username="bob").exists()
    assert blocking_violations(page) == []
    fits_the_width(page)
    context.close()


def test_the_audit_log_page_passes_axe_and_fits_390px(browser, live_server, users):
    page = log_in(browser, live_server.url, "admin", **PHONE)
    page.goto("/audit-log/")
    expect(page.get_by_role("heading", name="Audit log")).to_be_visible()
    expect(page.locator("table")).to_contain_text("sign_in")
    assert blocking_violations(page) == []
    fits_the_width(page)
    page.context.close()
