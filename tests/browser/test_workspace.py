"""The annotators' workspace in a real browser: the review stream, undo, bulk confirmation, the editor,
escaping, live job pages, uploads and exports. Screenshots go to var/test-artifacts/."""

import json
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import trajectory_edit
from simia_web.jobs.models import JobStatus, JobUnit, UnitStatus
from tests.browser.conftest import bulk_over_the_filter
from tests.support.factories import make_job, make_trajectory, verdict

pytestmark = pytest.mark.browser

ARTIFACTS = Path(__file__).resolve().parents[2] / "var" / "test-artifacts"
ARTIFACTS.mkdir(parents=True, exist_ok=True)


def shot(page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)


PAYLOAD = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=1">'


def test_keyboard_review_in_the_stream_with_undo(login):
    first = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    second = make_trajectory(judge=verdict(passed=False, confidence=0.6))
    third = make_trajectory(judge=verdict(passed=True))
    page = login("annotator")
    page.goto("/review/")
    expect(page.locator("table.queue tbody tr")).to_have_count(3)
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator("tr.row.current")).to_have_count(1)
    shot(page, "queue")
    page.keyboard.press("Enter")  # opening only views
    expect(page.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    expect(page.locator("#view-notice")).to_be_visible()
    assert Trajectory.objects.get(pk=second.pk).reserved_by_id is None

    page.goto("/review/")
    page.keyboard.press("s")  # start reviewing: the stream claims the head of the queue
    expect(page.locator("h1")).to_contain_text(f"Trajectory {first.pk}")
    expect(page.locator("#stream-bar")).to_be_visible()
    shot(page, "trajectory")
    assert Trajectory.objects.get(pk=first.pk).reserved_by.username == "annotator"

    page.keyboard.press("a")  # accept; the next free item is claimed and opens
    expect(page.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    expect(page.locator(".toast")).to_contain_text(f"Trajectory {first.pk}: accept")
    page.keyboard.press("u")  # undo from the toast
    expect(page.locator(".messages")).to_contain_text("Undone")
    assert Trajectory.objects.get(pk=first.pk).status == TrajectoryStatus.JUDGED_FAIL

    page.goto("/review/")
    page.click("#start-reviewing")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {first.pk}")
    page.keyboard.press("r")
    page.keyboard.type("the agent never confirmed")
    page.keyboard.press("Enter")
    expect(page.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    page.keyboard.press("j")  # skip: released, the next one claimed
    expect(page.locator("h1")).to_contain_text(f"Trajectory {third.pk}")
    assert Trajectory.objects.get(pk=second.pk).reserved_by_id is None
    page.keyboard.press("?")
    expect(page.locator("dialog#help")).to_be_visible()
    page.keyboard.press("Escape")
    page.click("#release-btn")
    expect(page.locator(".messages")).to_contain_text("released")
    assert Trajectory.objects.get(pk=third.pk).reserved_by_id is None
    rejected = Trajectory.objects.get(pk=first.pk)
    assert rejected.status == TrajectoryStatus.REJECTED
    assert Review.objects.get(trajectory=rejected, undone_at__isnull=True).reason == "the agent never confirmed"


def test_two_annotators_share_one_queue(browser, live_server, users):
    from tests.conftest import PASSWORD

    first = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    second = make_trajectory(judge=verdict(passed=False, confidence=0.5))
    pages = {}
    for role in ("annotator", "curator"):
        context = browser.new_context(viewport={"width": 1280, "height": 900}, base_url=live_server.url)
        context.set_default_timeout(10_000)
        page = context.new_page()
        page.goto("/accounts/login/")
        page.fill("input[name=username]", users[role].username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url("**/")
        pages[role] = page
    alice, bob = pages["annotator"], pages["curator"]
    alice.goto("/review/")
    alice.click("#start-reviewing")
    expect(alice.locator("h1")).to_contain_text(f"Trajectory {first.pk}")
    bob.goto("/review/")
    expect(bob.locator(f"tr[data-href^='/trajectories/{first.pk}/'] .badge.held")).to_have_text("annotator")
    bob.click("#start-reviewing")  # the stream passes over the held item
    expect(bob.locator("h1")).to_contain_text(f"Trajectory {second.pk}")
    bob.goto(f"/trajectories/{first.pk}/")
    expect(bob.locator("#reserved-notice")).to_contain_text("annotator")
    expect(bob.locator("#accept-btn")).to_be_disabled()
    expect(bob.locator("#disabled-reason")).to_contain_text("annotator is reviewing this item")
    shot(bob, "trajectory-held-by-someone-else")
    # Alice leaves the page: her hold goes with it, and Bob's buttons come back on reload.
    alice.goto("/review/")
    for _ in range(50):
        if Trajectory.objects.get(pk=first.pk).reserved_by_id is None:
            break
        bob.wait_for_timeout(100)
    bob.reload()
    expect(bob.locator("#accept-btn")).to_be_enabled()
    for page in pages.values():
        page.context.close()


def test_editor_with_tool_call_arguments(login):
    t = make_trajectory(judge=verdict(passed=False))
    page = login("annotator")
    page.goto(f"/trajectories/{t.pk}/")
    page.keyboard.press("e")
    page.wait_for_url(f"**/trajectories/{t.pk}/edit/**")
    page.wait_for_load_state("load")  # htmx (deferred) listens from here on
    args = page.locator("textarea[name='call-2-0-args']")
    args.fill('{"order_id": 42}')
    expect(page.locator(".call-errors")).to_contain_text("is not of type", timeout=5000)  # checked as typed
    args.fill('{"order_id": "W42"}')
    expect(page.locator(".call-errors")).to_be_empty(timeout=5000)
    page.locator("textarea[name='content-4']").fill("Your order W42 has been cancelled.")
    page.locator(".edit-msg").nth(4).locator("[data-insert]").click()
    page.locator(".edit-msg").nth(5).locator("select").select_option("user")
    page.locator(".edit-msg").nth(5).locator("textarea").fill("Thank you!")
    page.locator(".edit-msg").nth(1).locator("[data-move='-1']").click()  # user above system
    shot(page, "editor")
    page.click("#save-fix")
    expect(page.locator(".messages")).to_contain_text(f"Trajectory {t.pk}: fix and accept")
    t.refresh_from_db()
    assert t.status == TrajectoryStatus.ACCEPTED and t.version == 2
    assert [m["role"] for m in t.messages] == ["user", "system", "assistant", "tool", "assistant", "user"]
    assert json.loads(t.messages[2]["tool_calls"][0]["function"]["arguments"]) == {"order_id": "W42"}
    page.goto(f"/trajectories/{t.pk}/")
    expect(page.locator("#verdict-stale")).to_be_visible()
    expect(page.locator("#history table.sidebyside")).to_contain_text("Thank you!")


def test_editor_refuses_a_stale_version_and_keeps_the_text(login, users):
    t = make_trajectory(judge=verdict(passed=False))
    page = login("annotator")
    page.goto(f"/trajectories/{t.pk}/edit/")
    page.wait_for_load_state("networkidle")  # the editor has renewed its hold
    edited = [dict(m) for m in t.messages]
    edited[4]["content"] = "their fix"
    Trajectory.objects.filter(pk=t.pk).update(reserved_by=None)  # the annotator's hold lapsed
    trajectory_edit(trajectory=t, editor=users["curator"], messages=edited, expected_version=1)
    page.locator("textarea[name='content-4']").fill("my fix")
    page.click("#save-fix")
    expect(page.locator("#conflict")).to_contain_text("someone else changed this trajectory")
    expect(page.locator("#conflict")).to_contain_text("v2: edited by curator")
    expect(page.locator("textarea[name='content-4']")).to_have_value("my fix")
    t.refresh_from_db()
    assert t.messages[4]["content"] == "their fix" and not Review.objects.exists()


def test_script_payload_stays_inert(login):
    t = make_trajectory(judge=verdict(passed=False, rationale=PAYLOAD))
    messages = list(t.messages)
    messages[1] = {"role": "user", "content": PAYLOAD}
    messages[4] = {"role": "assistant", "content": PAYLOAD}
    Trajectory.objects.filter(pk=t.pk).update(messages=messages, preview=PAYLOAD)
    page = login("annotator")
    page.goto(f"/trajectories/{t.pk}/")
    expect(page.locator("#m1 .text")).to_have_text(PAYLOAD)
    expect(page.locator(".rationale")).to_contain_text("<script>window.__pwned=1</script>")
    page.goto("/review/?q=pwned")
    expect(page.locator("table.queue tbody tr")).to_have_count(1)
    page.goto(f"/trajectories/{t.pk}/edit/")
    page.goto(f"/trajectories/{t.pk}/")
    assert page.evaluate("typeof window.__pwned") == "undefined"
    assert page.locator("#m4 img").count() == 0 and page.locator("main script").count() == 0


def test_job_page_updates_live_and_shows_failure(login):
    job = make_job()
    units = [JobUnit.objects.create(job=job, stage="rollout", key=f"u{i}") for i in range(3)]
    page = login("curator")
    page.goto(f"/jobs/{job.pk}/")
    head = page.locator("#job-head")
    expect(head.locator(".done-count")).to_have_text("0")
    expect(head.locator("#job-status")).to_have_text("running")
    JobUnit.objects.filter(pk=units[0].pk).update(status=UnitStatus.DONE)
    expect(page.locator("#job-head .done-count")).to_have_text("1", timeout=8000)
    JobUnit.objects.filter(job=job).exclude(pk=units[0].pk).update(status=UnitStatus.FAILED)
    job.status, job.error = JobStatus.FAILED, "no unit of the last stage succeeded"
    job.save(update_fields=["status", "error"])
    expect(page.locator("#job-status")).to_have_text("failed", timeout=8000)
    expect(page.locator("#job-error")).to_contain_text("no unit of the last stage succeeded")
    expect(page.locator("#job-head progress.partial")).to_have_count(1)
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    shot(page, "job-failed")
    seen = []
    page.on("request", lambda request: seen.append(request.url) if "/progress/" in request.url else None)
    page.wait_for_timeout(4500)
    assert seen == []  # polling stopped


def test_a_running_units_progress_moves_on_the_job_page(login):
    job = make_job(kind="export")
    job.stage = "build"
    job.save(update_fields=["stage"])
    lease = {"lease_holder": "worker:1", "lease_until": timezone.now() + timedelta(hours=1)}
    progress = {"done": 340_000, "total": 1_000_000, "what": "records", "doing": "Building snapshot 12"}
    unit = JobUnit.objects.create(job=job, stage="build", key="snapshot:12", progress=progress, **lease)
    page = login("annotator")
    page.goto(f"/jobs/{job.pk}/")
    line = page.locator(f"#unit-progress-{unit.pk}")
    expect(line).to_have_text("Building snapshot 12: 340,000 of 1,000,000 records (34%)")
    shot(page, "job-unit-progress")
    JobUnit.objects.filter(pk=unit.pk).update(progress={**progress, "done": 500_000})  # the worker's next beat
    expect(line).to_contain_text("500,000 of 1,000,000", timeout=8000)
    expect(line.locator("progress")).to_have_attribute("value", "500000")


def test_bulk_accept_asks_for_confirmation_naming_the_count(login, users):
    rows = [make_trajectory(judge=verdict(passed=True)) for _ in range(3)]
    page = login("curator")
    page.goto("/review/")
    page.keyboard.press("j")
    page.keyboard.press("x")  # select with the keyboard
    page.check(f"input[name=ids][value='{rows[1].pk}']")
    expect(page.locator("[data-selected-count]")).to_have_text("2")
    page.click(".bulkbar button[type=submit]")
    expect(page.locator("#bulk-toast")).to_contain_text("2 trajectories accepted")
    assert Trajectory.objects.filter(status=TrajectoryStatus.ACCEPTED).count() == 2
    page.keyboard.press("u")  # the notice's undo takes the bulk decision back
    expect(page.locator(".messages")).to_contain_text("Undone: 2 trajectories wait for review again")
    assert Trajectory.objects.filter(status=TrajectoryStatus.ACCEPTED).count() == 0
    page.wait_for_load_state("load")  # the queue's keys listen from here on
    page.keyboard.press("j")
    page.keyboard.press("x")
    page.check(f"input[name=ids][value='{rows[1].pk}']")
    page.click(".bulkbar button[type=submit]")
    expect(page.locator("#bulk-toast")).to_contain_text("2 trajectories accepted")
    page.goto("/review/?status=all")
    bulk_over_the_filter(page, "reject", "batch off-policy")
    expect(page.locator("#bulk-confirm h1")).to_have_text("Reject 3 trajectories?")
    shot(page, "bulk-confirm")
    page.click("#confirm-bulk")
    expect(page.locator("#bulk-toast")).to_contain_text("3 trajectories rejected")
    assert Trajectory.objects.filter(status=TrajectoryStatus.REJECTED).count() == 3
    page.goto("/agreement/")
    expect(page.locator("#bulk-apart")).to_contain_text("decided only in bulk")
    shot(page, "agreement")
    page.goto("/")
    expect(page.locator("#chart-progress svg rect")).not_to_have_count(0)
    shot(page, "dashboard")


def test_upload_seeds_by_dropping_a_file(login, tmp_path):
    from tests.catalog.test_import import openai_record

    page = login("curator")
    page.goto("/seeds/")
    page.click("#upload-link")
    page.wait_for_url("**/seeds/upload/")
    page.wait_for_load_state("load")  # upload.js listens from here on
    data = "".join(json.dumps(openai_record(n)) + "\n" for n in range(2))
    handle = page.evaluate_handle(
        """(text) => { const dt = new DataTransfer();
           dt.items.add(new File([text], "orders.jsonl", {type: "application/json"})); return dt; }""",
        data,
    )
    page.dispatch_event("[data-dropzone]", "drop", {"dataTransfer": handle})
    expect(page.locator("[data-drop-label]")).to_contain_text("orders.jsonl")
    page.select_option("select[name=format]", "openai")
    page.fill("input[name=domain]", "shop")
    page.click("#upload-btn")
    expect(page.locator("#upload-result")).to_contain_text("Imported into domain 'shop'")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"nope": 1}\n')
    page.set_input_files("input[name=file]", str(bad))
    page.select_option("select[name=format]", "openai")
    page.click("#upload-btn")
    expect(page.locator("#upload-errors")).to_contain_text("Import refused")
    shot(page, "seed-upload-errors")


def test_export_and_download(login, eager):
    t = make_trajectory(judge=verdict())
    Trajectory.objects.filter(pk=t.pk).update(status="accepted")
    page = login("curator")
    page.goto("/exports/")
    page.select_option("select[name=format]", "openai")
    page.click("#export-create")
    expect(page.locator(".messages")).to_contain_text("is being built")
    expect(page.locator("#snapshots tbody tr, #snapshots tr[id^=snapshot-]").first).to_contain_text("succeeded")
    shot(page, "exports")
    with page.expect_download() as download:
        page.locator("#snapshots a.button").first.click()
    path = download.value.path()
    assert json.loads(Path(path).read_text().splitlines()[0])["messages"]


def test_judge_again_after_a_fix(login, users, eager, llm_stub):
    t = make_trajectory(judge=verdict(passed=False, score=0.2))
    edited = [dict(m) for m in t.messages]
    edited[4]["content"] = "Order W1 is cancelled; a confirmation email is on its way."
    trajectory_edit(trajectory=t, editor=users["annotator"], messages=edited, expected_version=1)
    page = login("curator")
    page.goto(f"/trajectories/{t.pk}/")
    expect(page.locator("#verdict-stale")).to_contain_text("the text is now version 2")
    page.click("#judge-again button")
    expect(page.locator(".messages")).to_contain_text("Judging version 2: job")
    expect(page.locator("#verdict-stale")).to_have_count(0)
    expect(page.get_by_text("On version 2")).to_be_visible()
