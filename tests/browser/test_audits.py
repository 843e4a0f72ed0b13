"""An audit in Chromium: an annotator decides a blind audit's sample by keyboard (the judge hidden until each item
is decided), then a curator accepts the rest on its evidence at a ceiling and asks for a snapshot certified by it;
axe-core finds no serious or critical violation on the audit's pages."""

import json

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect

from simia_web.audits.selectors import audit_estimate
from simia_web.audits.services import audit_create
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.exports.models import Snapshot
from tests.conftest import PASSWORD
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.browser
RATIONALE = "The refund went to the wrong card."
AXE = Axe()


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


def _blocking(page) -> list[str]:
    page.wait_for_function("() => !document.querySelector('.htmx-request')")
    violations = AXE.run(page).response["violations"]
    return [f"{v['id']}: {v['help']}" for v in violations if v["impact"] in ("serious", "critical")]


@pytest.fixture
def built_in_process(eager, settings, tmp_path):
    settings.EXPORTS_DIR = tmp_path / "exports"
    return settings.EXPORTS_DIR


def test_an_annotator_audits_blind_by_keyboard_then_a_curator_accepts_the_rest_and_certifies_a_snapshot(
    browser, live_server, users, built_in_process
):
    for i in range(14):
        make_trajectory(judge=verdict(passed=i % 7 != 0, score=0.4 if i % 7 == 0 else 0.9, rationale=RATIONALE))
    audit = audit_create(filters={}, sample_size=8, strategy="active", seed=5, actor=users["curator"])
    order = list(audit.items.order_by("position").values_list("trajectory_id", flat=True))

    # The annotator: the audit page, then the stream by keyboard.
    annotator = _signed_in(browser, live_server, users["annotator"])
    annotator.goto(f"/audits/{audit.pk}/")
    expect(annotator.locator("#headline")).to_contain_text("none yet")
    assert not _blocking(annotator), _blocking(annotator)
    annotator.focus("#start-audit")
    annotator.keyboard.press("Enter")
    for i, trajectory_id in enumerate(order):
        annotator.wait_for_url(f"**/audits/{audit.pk}/items/{trajectory_id}/?stream=1")
        annotator.wait_for_load_state("load")
        expect(annotator.locator("#judge-hidden")).to_be_visible()  # blind: no verdict, no rationale
        assert RATIONALE not in annotator.content()
        if i == 0:
            assert not _blocking(annotator), _blocking(annotator)
        if i % 4 == 1:
            annotator.keyboard.press("r")
            expect(annotator.locator("#reject-reason")).to_be_focused()
            annotator.keyboard.type("The answer contradicts the tool result.")
            annotator.keyboard.press("Enter")
        else:
            annotator.keyboard.press("a")
    annotator.wait_for_url(f"**/audits/{audit.pk}/")
    expect(annotator.locator(".messages")).to_contain_text("last free item")
    decided = Review.objects.filter(trajectory_id__in=order, bulk=False)
    assert decided.count() == 8 and decided.filter(decision="reject").count() == 2
    # Decided: the judge shows now.
    annotator.goto(f"/audits/{audit.pk}/items/{order[0]}/")
    expect(annotator.locator("#judge-verdict")).to_be_visible()
    expect(annotator.locator("#judge")).to_contain_text(RATIONALE)
    annotator.context.close()

    # The curator: refused above the ceiling, accepted at it, then a certified snapshot.
    high = audit_estimate(audit).headline.high
    curator = _signed_in(browser, live_server, users["curator"])
    curator.goto(f"/audits/{audit.pk}/")
    expect(curator.locator("#decided")).to_have_text("8")
    expect(curator.locator("#plot svg.chart")).to_be_visible()
    assert not _blocking(curator), _blocking(curator)
    curator.fill("#id_max_error_rate", "1")
    curator.click("#accept-rest-btn")
    expect(curator.locator(".messages")).to_contain_text(f"upper bound {high:.1%}")
    expect(curator.locator(".messages")).to_contain_text("above the ceiling 1.0%")
    ceiling = f"{min(100, 100 * high + 0.01):.2f}"
    curator.fill("#id_max_error_rate", ceiling)
    curator.click("#accept-rest-btn")
    expect(curator.locator(".messages")).to_contain_text("6 trajectories accepted on the evidence of audit")
    expect(curator.locator("#accepted-count")).to_have_text("6")
    assert Trajectory.objects.filter(status=TrajectoryStatus.ACCEPTED).count() == 12

    token = next(c["value"] for c in curator.context.cookies() if c["name"] == "csrftoken")
    body = {"format": "openai", "filters": {"status": "accepted"}, "audit": audit.pk}
    headers = {"X-CSRFToken": token, "Content-Type": "application/json", "Referer": live_server.url + "/"}
    refused = curator.request.post(
        "/api/v1/snapshots/", data=json.dumps({**body, "max_error_rate": 0.01}), headers=headers
    )
    assert refused.status == 400 and "ceiling" in refused.json()["max_error_rate"][0]
    created = curator.request.post(
        "/api/v1/snapshots/", data=json.dumps({**body, "max_error_rate": float(ceiling) / 100}), headers=headers
    )
    assert created.status == 202, created.text()
    snapshot = Snapshot.objects.get(pk=created.json()["id"])
    assert snapshot.is_built, snapshot.error
    curator.goto(f"/exports/{snapshot.pk}/")
    card = curator.request.get(f"/api/v1/snapshots/{snapshot.pk}/download/?file=card").text()
    assert "## Audit" in card and "with 95% confidence" in card
    report = curator.request.get(f"/api/v1/snapshots/{snapshot.pk}/download/?file=report").json()
    assert report["audit"]["id"] == audit.pk and report["audit"]["records_accepted_on_evidence"] == 6
    curator.context.close()
