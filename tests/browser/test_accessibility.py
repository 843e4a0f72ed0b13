"""Accessibility in Chromium: axe-core (from the pinned `axe-playwright-python` package) finds no serious or
critical violation on any page, as each role that can open it (the review workflow's pages too: guidelines with
their history, the reviewer queue, overturned decisions, a gold item before and after it is answered, an annotator's
quality); and the queue, the trajectory page and the editor work at a phone's width (390 px) without sideways
scrolling, their key buttons within reach, as every page a curator opens fits it."""

from datetime import timedelta

import pytest
from axe_playwright_python.sync_playwright import Axe
from django.template.loader import render_to_string
from django.utils import timezone
from playwright.sync_api import expect

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import workspace_review_stage_set
from simia_web.calibration.models import CalibrationAnswer, CalibrationRun
from simia_web.calibration.services import assignments_create, rating_save
from simia_web.calibration.services import run_summarize as calibration_summarize
from simia_web.catalog.guidelines import guidelines_save
from simia_web.catalog.models import Seed
from simia_web.catalog.references import ReferenceConfig, reference_set
from simia_web.catalog.services import apis_store, domain_ensure, tasks_store
from simia_web.curation.models import Trajectory
from simia_web.curation.services import draft_save, gold_mark, review_decide, trajectory_edit
from simia_web.exports.services import snapshot_create
from simia_web.fidelity.models import FidelityCall, FidelityRun, FidelityTrajectory, Outcome
from simia_web.fidelity.services import run_summarize
from simia_web.jobs.models import Job, JobStatus, JobUnit, UnitStatus
from simia_web.llm.models import EndpointProfile, LLMCall
from simia_web.operations.models import WebhookDelivery, WebhookSubscription
from simia_web.simulation.judge import CRITERIA
from tests.browser.conftest import bulk_over_the_filter
from tests.conftest import PASSWORD
from tests.support.factories import make_job, make_trajectory, verdict

pytestmark = pytest.mark.browser

AXE = Axe()
BLOCKING = {"serious", "critical"}

# Every page, with the least role that opens it; a role below gets the 403 page, which is checked too.
PAGES = {
    "annotator": [
        "/",
        "/review/",
        "/review/?status=all&sort=-score",
        "/trajectories/{trajectory}/",
        "/trajectories/{errored}/",
        "/trajectories/{trajectory}/edit/",
        "/review/duplicates/",
        "/review/duplicates/{cluster}/",
        "/agreement/",
        "/jobs/",
        "/jobs/{running_job}/",
        "/jobs/{failed_job}/",
        "/domains/",
        "/domains/{domain}/",
        "/apis/",
        "/apis/{api}/",
        "/tasks/",
        "/tasks/{task}/",
        "/seeds/",
        "/seeds/{seed}/",
        "/exports/",
        "/exports/{snapshot}/",
        "/fidelity/",
        "/fidelity/{fidelity_run}/",
        "/calibration/",
        "/calibration/runs/{calibration_run}/",
        "/calibration/assigned/",
        "/guidelines/",
        "/domains/{domain}/guidelines/",
        "/review/overturned/",
        "/review/annotators/{person}/",
        "/trajectories/{gold}/",
        "/api/docs/",
        "/no-such-page/",
    ],
    "curator": [
        "/review/second-look/",  # reviewers and above
        "/queue/synthesis/",
        "/queue/rollouts/",
        "/queue/amplify/",
        "/queue/fidelity/",
        "/seeds/upload/",
        "/calibration/assignments/",
        "/queue/calibrate/",
        "/domains/new/",
        "/apis/new/",
        "/apis/import/",
        "/tasks/new/",
    ],
    "admin": [
        "/llm/calls/{call}/",
        "/webhooks/",
        "/webhooks/{webhook}/",
        "/llm/endpoints/",
        "/llm/endpoints/new/",
        "/llm/endpoints/{profile}/",
        "/users/",
        "/users/new/",
        "/users/{person}/",
    ],
}
ROLES = ["annotator", "curator", "admin"]


def pages_for(role: str) -> list[str]:
    """The role's own pages and, for the pages of the roles above it, the 403 page they get instead."""
    return [url for other in ROLES for url in PAGES[other]]


def seed_everything(users) -> dict:
    """One of each thing a page shows: a domain with APIs, tasks and a seed; trajectories judged, violating,
    decided and errored; a running and a failed job with LLM calls; a snapshot that left a record out."""
    domain = domain_ensure(name="shop", description="A small shop", policy="Be polite.\nConfirm first.")
    apis = apis_store(
        domain=domain,
        apis=[
            {
                "name": "cancel_order",
                "description": "Cancel an order",
                "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}},
                "kind": "write",
                "touches": ["orders"],
            },
            {"name": "bad api", "description": "An invalid one", "parameters": {}},
        ],
        state_schema={"type": "object"},
        initial_state={"orders": {"W1": {"status": "pending"}}},
    )
    tasks = tasks_store(
        domain=domain,
        tasks=[
            {"instruction": "Cancel order W1.", "apis_needed": ["cancel_order"], "expected_outcome": "cancelled"},
            {"instruction": "Use a ghost.", "apis_needed": ["ghost"]},
        ],
    )
    running_job = make_job()
    for i, status in enumerate([UnitStatus.DONE, UnitStatus.PENDING, UnitStatus.FAILED]):
        JobUnit.objects.create(job=running_job, stage="rollout", key=f"u{i}", status=status)
    running_job.units.filter(status=UnitStatus.PENDING).update(  # a live worker runs it and says how far it got
        lease_holder="worker:1",
        lease_until=timezone.now() + timedelta(hours=1),
        progress={"done": 3400, "total": 10000, "what": "steps", "doing": "Rolling out task 1"},
    )
    failed_job = make_job(status=JobStatus.FAILED)
    failed_job.error = "connection_error: could not reach the endpoint"
    failed_job.save(update_fields=["error"])
    call = LLMCall.objects.create(
        stage="judge",
        model="m",
        request_hash="h",
        request={"messages": [{"role": "user", "content": "hi"}]},
        response={"choices": []},
        job=failed_job,
    )
    LLMCall.objects.create(
        stage="agent", model="m", request_hash="h2", request={}, job=failed_job, error_kind="timeout", error="slow"
    )
    trajectory = make_trajectory(
        judge=verdict(passed=False, confidence=0.9), violations=["unknown_tool"], job=running_job, task=tasks[0]
    )
    accepted = make_trajectory(judge=verdict(passed=True))
    review_decide(trajectory=accepted, reviewer=users["annotator"], decision="accept", expected_version=1)
    rejected = make_trajectory(judge=verdict(passed=True, score=0.4))
    review_decide(trajectory=rejected, reviewer=users["curator"], decision="reject", expected_version=1, reason="rude")
    broken = make_trajectory(judge=verdict())
    messages = [dict(m) for m in broken.messages]
    del messages[3]["tool_call_id"]  # the export's gate leaves it out
    Trajectory.objects.filter(pk=broken.pk).update(messages=messages, status="accepted")
    errored = make_trajectory(
        messages=[{"role": "system", "content": "You are a retail agent."}, {"role": "user", "content": "Hello?"}],
        termination_reason="llm_error",
    )
    for _ in range(3):
        make_trajectory(judge=verdict(passed=True, score=0.7), domain="air")
    repeated = [dict(m) for m in trajectory.messages]
    repeated[1] = {"role": "user", "content": "Cancel order W1 please, it was ordered twice by mistake last night."}
    duplicated = [make_trajectory(messages=repeated, judge=verdict(score=s)) for s in (0.6, 0.8)]
    draft_save(
        trajectory=trajectory,
        author=users["annotator"],
        based_on_version=trajectory.version,
        fields={"content-4": ["a draft"]},
    )
    seed = Seed.objects.create(domain=domain, source_format="openai", messages=trajectory.messages, content_hash="s")
    snapshot = snapshot_create(format="openai", filters={"status": "accepted"})
    webhook = WebhookSubscription.objects.create(
        name="ops", url="http://127.0.0.1:9/hook", events=["job.failed", "snapshot.ready"], created_by=users["admin"]
    )
    WebhookDelivery.objects.create(
        subscription=webhook,
        event="job.failed",
        payload={},
        status="delivered",
        attempts=2,
        response_code=200,
        duration_ms=12,
        last_attempt_at=timezone.now(),
    )
    WebhookDelivery.objects.create(
        subscription=webhook,
        event="ping",
        payload={},
        status="failed",
        attempts=8,
        response_code=503,
        error="HTTP 503: down for maintenance",
        duration_ms=40,
        last_attempt_at=timezone.now(),
    )
    reference_set(domain=domain, config=ReferenceConfig(url="http://127.0.0.1:9/mcp", reset_tool="reset"))
    run = FidelityRun.objects.create(domain=domain, reference={"url": "http://127.0.0.1:9/mcp"}, method="structural")
    result = FidelityTrajectory.objects.create(
        run=run, trajectory=trajectory, trajectory_version=1, counts={"different": 1}, calls=1, score=0.0
    )
    FidelityCall.objects.create(
        run=run,
        result=result,
        message_index=2,
        api="cancel_order",
        arguments={"order_id": "W1"},
        simulated={"status": "cancelled"},
        reference={"status": "pending"},
        outcome=Outcome.DIFFERENT,
        detail="/status: simulated 'cancelled', reference 'pending'",
    )
    run_summarize(run=run)
    rating_save(
        trajectory_id=trajectory.pk,
        annotator=users["annotator"],
        text_version=1,
        scores=dict.fromkeys(CRITERIA, 0.2),
        message_labels={"2": {"error_types": ["wrong_tool"], "comment": "Looked up nothing first."}},
    )
    assignments_create(
        trajectory_ids=[trajectory.pk, accepted.pk],
        annotators=[users["annotator"]],
        overlap=1,
        actor=None,
        selection={},
        workspace=Workspace.objects.get(slug="default"),
    )
    calibration = CalibrationRun.objects.create(prompt_version="judge-v4", profile_name="stub")
    CalibrationAnswer.objects.create(
        run=calibration, trajectory=trajectory, trajectory_version=1, scores=dict.fromkeys(CRITERIA, 0.9), passed=True
    )
    CalibrationAnswer.objects.create(run=calibration, trajectory=accepted, trajectory_version=1, error="not JSON")
    calibration_summarize(run=calibration)
    gold = review_workflow_seed(users, domain)
    return {
        "gold": gold.pk,
        "calibration_run": calibration.pk,
        "fidelity_run": run.pk,
        "trajectory": trajectory.pk,
        "errored": errored.pk,
        "running_job": running_job.pk,
        "failed_job": failed_job.pk,
        "domain": domain.name,
        "api": apis[0].pk,
        "task": tasks[0].pk,
        "seed": seed.pk,
        "snapshot": snapshot.pk,
        "call": call.pk,
        "webhook": webhook.pk,
        "profile": EndpointProfile.objects.get_or_create(name="shop-llm", defaults={"model": "m"})[0].pk,
        "person": users["annotator"].pk,
        "cluster": duplicated[0].pk,
    }


def review_workflow_seed(users, domain) -> Trajectory:
    """Guidelines with a history, decisions awaiting a reviewer and one overturned, and a gold item with expected
    ratings that the annotator rated and answered, as did the reviewer; returns the gold item."""
    workspace = Workspace.objects.get(slug="default")
    rules = "## Refunds\nRefund **only** to the original card.\n\n| case | answer |\n| --- | --- |\n| late | no |"
    for version, text in enumerate(("## Refunds\nRefund to the original card.", rules)):
        guidelines_save(
            workspace_id=workspace.pk, domain=None, text=text, expected_version=version, actor=users["curator"]
        )
    guidelines_save(
        workspace_id=workspace.pk,
        domain=domain,
        text=f"{rules}\n\nShop: confirm first.",
        expected_version=0,
        actor=users["curator"],
    )
    workspace_review_stage_set(workspace=workspace, on=True, actor=users["admin"])
    waiting, overturned = (make_trajectory(judge=verdict(passed=True)) for _ in range(2))
    for t in (waiting, overturned):
        review_decide(trajectory=t, reviewer=users["annotator"], decision="accept", expected_version=1)
    review_decide(
        trajectory=overturned,
        reviewer=users["reviewer"],
        decision="reject",
        expected_version=Trajectory.objects.get(pk=overturned.pk).version,
        reason="Refunded to a new card, against the guidelines.",
    )
    workspace_review_stage_set(workspace=workspace, on=False, actor=users["admin"])
    gold = make_trajectory(judge=verdict(passed=True))
    gold_mark(
        trajectory=gold,
        expected_decision="reject",
        expected_scores={"task_completed": 1.0, "policy_followed": 0.2},
        explanation="It refunds the order twice.",
        actor=users["curator"],
    )
    rating_save(trajectory_id=gold.pk, annotator=users["annotator"], text_version=1, scores={"policy_followed": 0.6})
    for person in ("annotator", "reviewer"):
        review_decide(trajectory=gold, reviewer=users[person], decision="reject", expected_version=1, reason="Twice.")
    return gold


def log_in(browser, base_url: str, username: str | None, **options):
    context = browser.new_context(base_url=base_url, **options)
    context.set_default_timeout(15_000)
    page = context.new_page()
    if username:
        page.goto("/accounts/login/")
        page.fill("input[name=username]", username)
        page.fill("input[name=password]", PASSWORD)
        page.click("button[type=submit]")
        page.wait_for_url("**/")
    return page


def blocking_violations(page) -> list[dict]:
    """axe-core's serious and critical violations on the page once htmx has drawn it, every <details> opened first
    so that what a person can unfold is checked too."""
    page.wait_for_function("() => !document.querySelector('.htmx-request')")  # a part loading (or polled) is in place
    page.evaluate("document.querySelectorAll('details').forEach((d) => { d.open = true; })")
    results = AXE.run(page).response
    return [v for v in results["violations"] if v["impact"] in BLOCKING]


def describe(found: dict[str, list[dict]]) -> str:
    lines = []
    for where, violations in found.items():
        for v in violations:
            lines.append(f"{where}: {v['id']} ({v['impact']}, {len(v['nodes'])} nodes): {v['help']}")
            for node in v["nodes"][:5]:
                lines.append(f"    {', '.join(map(str, node['target']))}: {node.get('failureSummary', '')}")
    return "\n".join(lines)


def test_no_serious_or_critical_axe_violation_on_any_page(browser, live_server, users, eager):
    ids = seed_everything(users)
    found: dict[str, list[dict]] = {}
    counts: dict[str, int] = {}

    def check(page, where: str) -> None:
        violations = blocking_violations(page)
        counts[where] = sum(len(v["nodes"]) for v in violations)
        if violations:
            found[where] = violations

    anonymous = log_in(browser, live_server.url, None)
    anonymous.goto("/accounts/login/")
    check(anonymous, "anonymous /accounts/login/")
    anonymous.fill("input[name=username]", "nobody")
    anonymous.fill("input[name=password]", "wrong")
    anonymous.click("button[type=submit]")
    check(anonymous, "anonymous /accounts/login/ (refused)")
    # The 500 page is static HTML (no context): served as it renders, under the live server's static files.
    anonymous.route("**/server-error/", lambda route: route.fulfill(body=render_to_string("500.html"), status=500))
    anonymous.goto("/server-error/")
    check(anonymous, "anonymous 500 page")
    anonymous.context.close()

    for role in ROLES:
        page = log_in(browser, live_server.url, users[role].username)
        for url in pages_for(role):
            url = url.format(**ids)
            response = page.goto(url)
            assert response.status in (200, 403, 404), (role, url, response.status)
            if url == "/api/docs/":
                page.wait_for_selector(".swagger-ui .opblock")  # Swagger UI has drawn the operations
            check(page, f"{role} {url}")
        page.context.close()

    # States a person reaches by acting: the review stream, a decision's notice, an item someone else holds,
    # the keyboard help, a refused upload and the bulk confirmation.
    page = log_in(browser, live_server.url, users["annotator"].username)
    page.goto("/review/")
    page.click("#start-reviewing")
    page.wait_for_selector("#stream-bar")
    check(page, "annotator trajectory in the review stream")
    page.keyboard.press("a")
    page.wait_for_selector(".toast")
    check(page, "annotator trajectory after a decision (notice with Undo)")
    page.keyboard.press("?")
    page.wait_for_selector("dialog#help[open]")
    check(page, "annotator keyboard help")
    page.context.close()

    held = Trajectory.objects.filter(status="judged_pass", domain__name="air").first()
    Trajectory.objects.filter(pk=held.pk).update(
        reserved_by=users["admin"], reserved_until=timezone.now() + timedelta(hours=1)
    )
    page = log_in(browser, live_server.url, users["curator"].username)
    page.goto(f"/trajectories/{held.pk}/")
    check(page, "curator trajectory held by someone else")
    page.goto(f"/trajectories/{held.pk}/edit/")
    check(page, "curator editor of an item held by someone else")
    page.goto("/seeds/upload/")
    bad_file = {"name": "bad.jsonl", "mimeType": "application/json", "buffer": b'{"x": 1}\n'}
    page.set_input_files("input[name=file]", bad_file)
    page.select_option("select[name=format]", "openai")
    page.click("#upload-btn")
    page.wait_for_selector("#upload-errors")
    check(page, "curator seed upload refused")
    page.goto("/review/?status=all")
    bulk_over_the_filter(page, "reject", "off-policy")
    page.wait_for_selector("#bulk-confirm")
    check(page, "curator bulk confirmation")
    page.context.close()

    print("\nserious/critical axe nodes per page:\n" + "\n".join(f"{n:4d}  {where}" for where, n in counts.items()))
    print(f"total {sum(counts.values())} on {sum(1 for n in counts.values() if n)} of {len(counts)} pages")
    assert not found, "axe-core found serious or critical violations:\n" + describe(found)


def test_job_status_is_announced_and_a_refused_decision_takes_the_focus(browser, live_server, users):
    job = make_job()
    JobUnit.objects.create(job=job, stage="rollout", key="u0")
    page = log_in(browser, live_server.url, users["curator"].username)
    page.goto(f"/jobs/{job.pk}/")
    page.wait_for_load_state("load")  # htmx and the announcer are running
    expect(page.locator("#status-announcer")).to_have_text("")
    JobUnit.objects.filter(job=job).update(status=UnitStatus.DONE)
    job.status = JobStatus.SUCCEEDED
    job.save(update_fields=["status"])
    expect(page.locator("#status-announcer")).to_have_text(f"Job {job.pk} succeeded", timeout=8000)

    trajectory = make_trajectory(judge=verdict(passed=False))
    page.goto(f"/trajectories/{trajectory.pk}/")
    page.wait_for_load_state("load")
    edited = [dict(m) for m in trajectory.messages]
    edited[4]["content"] = "Someone else's fix."
    trajectory_edit(trajectory=trajectory, editor=users["admin"], messages=edited, expected_version=1)
    page.click("#accept-btn")
    expect(page.locator("#conflict")).to_be_focused()
    page.context.close()


def test_the_judge_is_chosen_by_its_label_on_a_queue_page_and_a_refusal_marks_it(browser, live_server, users):
    page = log_in(browser, live_server.url, users["curator"].username)
    page.goto("/queue/amplify/")
    judge = page.get_by_label("Judge:", exact=True)
    expect(judge).to_have_value("route")  # the serializer's default
    judge.select_option("best_calibrated")
    page.get_by_role("button", name="Queue job").click()
    judge = page.get_by_label("Judge:", exact=True)
    expect(judge).to_have_attribute("aria-invalid", "true")
    expect(page.locator(".errorlist")).to_contain_text("no calibration run has finished")
    assert not Job.objects.filter(kind="amplify").exists()

    profile = EndpointProfile.objects.create(name="stub", base_url="http://127.0.0.1:9/v1", model="m")
    run = CalibrationRun.objects.create(
        prompt_version="judge-v4",
        profile=profile,
        profile_name="stub",
        finished_at=timezone.now(),
        summary={"figures": {"passed": {"kappa": 0.714, "accuracy": 0.9}}},
    )
    page.goto("/queue/rollouts/")
    expect(page.get_by_label("Judge:", exact=True).locator("option[value=best_calibrated]")).to_have_text(
        f"The best-calibrated prompt and endpoint (judge-v4 × stub, kappa 0.71, run {run.pk})"
    )
    page.context.close()


PHONE = {"viewport": {"width": 390, "height": 844}, "device_scale_factor": 1, "is_mobile": True, "has_touch": True}


def fits_the_width(page) -> None:
    width = page.evaluate("[document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert width[0] <= width[1], f"{page.url} scrolls sideways: {width[0]} px of content in {width[1]} px"


def within_reach(page, selector: str) -> None:
    """The control, once scrolled to, is wholly inside the viewport and nothing (a sticky bar) covers it."""
    control = page.locator(selector).first
    control.scroll_into_view_if_needed()
    box = control.bounding_box()
    assert box is not None, f"{selector} is not shown"
    viewport = page.viewport_size
    assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"], (selector, box)
    assert box["y"] >= 0 and box["y"] + box["height"] <= viewport["height"], (selector, box)
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    assert control.evaluate("(el, [x, y]) => el.contains(document.elementFromPoint(x, y))", centre), (
        f"{selector} is covered"
    )


def test_queue_trajectory_and_editor_at_390px(browser, live_server, users, eager, tmp_path_factory):
    shots = tmp_path_factory.mktemp("phone")
    ids = seed_everything(users)
    trajectory = Trajectory.objects.get(pk=ids["trajectory"])
    long_words = "a_very_long_identifier_without_any_break_" * 4
    messages = [dict(m) for m in trajectory.messages]
    messages[4]["content"] = f"Order W1 is cancelled. Reference {long_words}."
    Trajectory.objects.filter(pk=trajectory.pk).update(messages=messages, preview=f"Cancel {long_words}")
    page = log_in(browser, live_server.url, users["curator"].username, **PHONE)

    page.goto("/review/?status=all")
    fits_the_width(page)
    for control in ("#start-reviewing", "#queue-filters button[type=submit]", ".bulkbar button[type=submit]"):
        within_reach(page, control)
    box = page.locator("#queue-table").locator("xpath=..")
    assert box.evaluate("b => b.scrollWidth > b.clientWidth"), "the queue's table scrolls in its own box"
    assert box.get_attribute("tabindex") == "0" and box.get_attribute("role") == "region"  # and takes the keys
    page.screenshot(path=str(shots / "queue.png"), full_page=True)
    found = {"queue": blocking_violations(page)}

    page.goto(f"/trajectories/{trajectory.pk}/")
    fits_the_width(page)
    conversation = page.locator(".conversation").bounding_box()
    sidebar = page.locator(".sidebar").bounding_box()
    assert sidebar["y"] >= conversation["y"] + conversation["height"], "the sidebar covers the conversation"
    for control in ("#accept-btn", "#decide-reject button", "#edit-link", "#judge-again button"):
        within_reach(page, control)
    page.screenshot(path=str(shots / "trajectory.png"), full_page=True)
    found["trajectory"] = blocking_violations(page)

    page.goto(f"/trajectories/{trajectory.pk}/edit/")
    fits_the_width(page)
    for control in ("#save-fix", "#save-edit", "#editor-back", "[data-add-message]"):
        within_reach(page, control)
    for control in ("[data-move='-1']", "[data-move='1']", "[data-insert]", "[data-remove]", "[data-remove-call]"):
        within_reach(page, f".edit-msg:nth-child(3) {control}")
    page.screenshot(path=str(shots / "editor.png"), full_page=True)
    found["editor"] = blocking_violations(page)
    found = {where: violations for where, violations in found.items() if violations}
    assert not found, "axe-core found serious or critical violations at 390 px:\n" + describe(found)

    for url in pages_for("curator"):
        page.goto(url.format(**ids))
        if url == "/api/docs/":
            page.wait_for_selector(".swagger-ui .opblock")
        fits_the_width(page)
    print(f"\nscreenshots at 390 px: {shots}")
    page.context.close()


def sticky_heights(page) -> list[float]:
    """The heights of the editor's sticky parts (what stays on screen over the messages as one scrolls)."""
    return page.evaluate(
        """[...document.querySelectorAll('#editor, #editor *')]
             .filter(el => getComputedStyle(el).position === 'sticky')
             .map(el => el.getBoundingClientRect().height)"""
    )


@pytest.mark.parametrize("device", ["phone", "narrow window"])
def test_editor_save_bar_is_compact_at_390px(browser, live_server, users, transactional_db, device):
    """At 390 × 844 the sticky save bar takes under a tenth of the screen (it took a sixth), with a saved draft's
    status shown too, on a touch phone and in a narrow desktop window (whose buttons name their keys)."""
    trajectory = make_trajectory()
    options = PHONE if device == "phone" else {"viewport": PHONE["viewport"]}
    page = log_in(browser, live_server.url, users["annotator"].username, **options)
    page.goto(f"/trajectories/{trajectory.pk}/edit/")
    fits_the_width(page)
    limit = 0.10 * PHONE["viewport"]["height"]
    heights = sticky_heights(page)
    assert len(heights) == 1 and heights[0] < limit, f"the save bar is {heights} px high at 390 px (limit {limit})"
    page.locator(".edit-msg textarea").first.fill("Please cancel order W1 today.")
    expect(page.locator("#draft-status")).to_contain_text("Draft saved")
    heights = sticky_heights(page)
    assert len(heights) == 1 and heights[0] < limit, f"with its status, the save bar is {heights} px high"
    for control in ("#save-fix", "#save-edit", "input[name=reason]"):
        within_reach(page, control)
    assert page.locator("#save-fix").inner_text().strip() == "Save and accept"  # its key hint goes whole
    # A field the keyboard reaches mid-page is not under the bar.
    within_reach(page, ".edit-msg:nth-child(2) textarea")
    page.context.close()
