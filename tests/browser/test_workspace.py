"""The annotators' workspace in a real browser: keyboard review, fixes, conflicts, escaping, live progress."""

import pytest
from playwright.sync_api import expect

from simia_web.core.services import versioned_update
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.jobs.models import JobStatus, JobUnit, UnitStatus
from tests.pages.factories import make_job, make_trajectory, verdict

pytestmark = pytest.mark.browser

PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


def test_login_and_keyboard_review(login):
    first = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    second = make_trajectory(judge=verdict(passed=False, confidence=0.6))
    third = make_trajectory(judge=verdict(passed=True))
    page = login("annotator")
    page.screenshot(path="/tmp/dashboard.png", full_page=True)
    page.goto("/review/")
    expect(page.locator("table.queue tbody tr")).to_have_count(3)
    page.screenshot(path="/tmp/review-queue.png", full_page=True)
    page.click(f"a[href^='/trajectories/{first.pk}/']")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {first.pk}")
    page.screenshot(path="/tmp/trajectory.png", full_page=True)

    page.keyboard.press("j")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    page.keyboard.press("k")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {first.pk}")

    page.keyboard.press("a")  # accept; the next item opens
    expect(page.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    expect(page.locator(".messages")).to_contain_text(f"Trajectory {first.pk}: accept")

    page.keyboard.press("r")
    page.keyboard.type("the agent never confirmed")
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {third.pk}")

    page.keyboard.press("?")
    expect(page.locator("dialog#help")).to_be_visible()
    page.keyboard.press("Escape")

    assert Trajectory.objects.get(pk=first.pk).status == TrajectoryStatus.ACCEPTED
    rejected = Trajectory.objects.get(pk=second.pk)
    assert rejected.status == TrajectoryStatus.REJECTED
    assert Review.objects.get(trajectory=rejected).reason == "the agent never confirmed"


def test_fix_and_accept_inline(login):
    t = make_trajectory(judge=verdict(passed=False))
    page = login("annotator")
    page.goto(f"/trajectories/{t.pk}/")
    page.keyboard.press("e")
    box = page.locator("textarea[name='content-4']")
    expect(box).to_be_visible()
    box.fill("Your order W1 has been cancelled.")
    page.click("#fix-text-btn")
    expect(page.locator(".messages")).to_contain_text(f"Trajectory {t.pk}: fix and accept")
    t.refresh_from_db()
    assert t.status == TrajectoryStatus.ACCEPTED and t.version == 2
    assert t.messages[4]["content"] == "Your order W1 has been cancelled."


def test_conflicting_save_is_refused(login):
    t = make_trajectory(judge=verdict(passed=False))
    page = login("annotator")
    page.goto(f"/trajectories/{t.pk}/")
    # Someone else saves a new version while the page is open.
    edited = [dict(m) for m in t.messages]
    edited[4]["content"] = "their fix"
    versioned_update(obj=t, expected_version=1, fields={"messages": edited})
    page.keyboard.press("e")
    page.locator("textarea[name='content-4']").fill("my fix")
    page.click("#fix-text-btn")
    conflict = page.locator("#conflict")
    expect(conflict).to_be_visible()
    page.screenshot(path="/tmp/conflict.png", full_page=True)
    expect(conflict).to_contain_text("someone else changed this trajectory")
    expect(conflict).to_contain_text("it is now version 2")
    t.refresh_from_db()
    assert t.messages[4]["content"] == "their fix" and not Review.objects.exists()


def test_script_payload_stays_inert(login):
    t = make_trajectory(judge=verdict(passed=False, rationale=PAYLOAD))
    messages = list(t.messages)
    messages[1] = {"role": "user", "content": PAYLOAD}
    messages[4] = {"role": "assistant", "content": PAYLOAD}
    Trajectory.objects.filter(pk=t.pk).update(messages=messages)
    page = login("annotator")
    page.goto(f"/trajectories/{t.pk}/")
    expect(page.locator("#m1 .text")).to_have_text(PAYLOAD)
    expect(page.locator(".rationale")).to_contain_text("<script>window.__pwned=1</script>")
    page.goto("/review/?q=pwned")
    expect(page.locator("table.queue tbody tr")).to_have_count(1)
    page.goto(f"/trajectories/{t.pk}/")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#m4 img").count() == 0 and page.locator("main script").count() == 0


def test_job_progress_updates_by_polling(login):
    job = make_job()
    units = [JobUnit.objects.create(job=job, stage="rollout", key=f"u{i}") for i in range(3)]
    page = login("annotator")
    page.goto(f"/jobs/{job.pk}/")
    progress = page.locator(f"#job-progress-{job.pk}")
    expect(progress.locator(".done-count")).to_have_text("0")
    page.screenshot(path="/tmp/job-detail.png", full_page=True)
    JobUnit.objects.filter(pk=units[0].pk).update(status=UnitStatus.DONE)
    expect(progress.locator(".done-count")).to_have_text("1", timeout=8000)
    JobUnit.objects.filter(job=job).update(status=UnitStatus.DONE)
    job.status = JobStatus.SUCCEEDED
    job.save(update_fields=["status"])
    expect(progress.locator(".done-count")).to_have_text("3", timeout=8000)
    expect(progress).to_have_attribute("data-status", "succeeded")
    # Polling has stopped: no trigger left, and no further requests reach the server.
    assert progress.get_attribute("hx-trigger") is None
    seen = []
    page.on("request", lambda request: seen.append(request.url) if "/progress/" in request.url else None)
    page.wait_for_timeout(4500)
    assert seen == []


def test_curator_bulk_accepts_selected_rows(login, users):
    rows = [
        make_trajectory(judge=verdict(passed=True), violations=["unknown_tool"] if i == 0 else ()) for i in range(3)
    ]
    Review.objects.create(trajectory=rows[2], reviewer=users["admin"], decision="reject", trajectory_version=1)
    page = login("curator")
    page.goto("/review/")
    page.check(f"input[name=ids][value='{rows[0].pk}']")
    page.check(f"input[name=ids][value='{rows[1].pk}']")
    page.screenshot(path="/tmp/review-queue-curator.png", full_page=True)
    page.click(".bulkbar button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("2 trajectories accepted")
    assert Trajectory.objects.filter(status=TrajectoryStatus.ACCEPTED).count() == 2
    page.goto("/agreement/")
    expect(page.locator("#kappa")).to_be_visible()
    page.screenshot(path="/tmp/agreement.png", full_page=True)
