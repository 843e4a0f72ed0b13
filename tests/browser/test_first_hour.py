"""The first hour, in Chromium: a new admin on an empty database connects an LLM (the tests' scripted server),
tests it, creates a domain by form, imports its APIs from an OpenAPI document, queues a synthesis, reviews two items
and builds a snapshot, never opening /admin/. Then every new form sent empty, out of range or before what it needs
exists: the answer is always the page itself with what to do. axe-core finds nothing serious on the new pages, and
each fits a 390 px screen."""

import json

import pytest
from playwright.sync_api import expect

from simia_web.accounts.models import Role
from simia_web.accounts.services import user_create
from simia_web.catalog.models import Api, Domain
from simia_web.curation.models import Review
from simia_web.exports.models import Snapshot
from simia_web.jobs.models import Job, JobStatus
from simia_web.llm.keys import api_key_decrypt
from simia_web.llm.models import EndpointProfile
from tests.browser.test_accessibility import blocking_violations, describe
from tests.conftest import PASSWORD
from tests.support.llm_stub import StubLLM
from tests.support.scripts import pipeline_responder

pytestmark = pytest.mark.browser

KEY = "sk-first-hour-0123456789"
OPENAPI = {
    "openapi": "3.0.3",
    "info": {"title": "Shop catalogue", "version": "1"},
    "paths": {
        "/products": {
            "get": {
                "operationId": "listProducts",
                "summary": "List the products on sale.",
                "parameters": [{"name": "category", "in": "query", "schema": {"type": "string"}}],
                "responses": {"200": {"description": "The products"}},
            }
        },
        "/wishlist": {
            "post": {
                "operationId": "addToWishlist",
                "summary": "Add a product to the wishlist.",
                "requestBody": {
                    "required": True,
                    "content": {
                        "application/json": {
                            "schema": {
                                "type": "object",
                                "properties": {"sku": {"type": "string"}},
                                "required": ["sku"],
                            }
                        }
                    },
                },
                "responses": {"201": {"description": "Added"}},
            }
        },
    },
}


@pytest.fixture
def stub():
    server = StubLLM(responder=pipeline_responder()).start()
    yield server
    server.stop()


@pytest.fixture
def new_admin(page, transactional_db):
    """An empty database with one admin, logged in: nothing else exists."""
    user_create(username="founder", role=Role.ADMIN, password=PASSWORD)
    page.context.set_default_timeout(60_000)  # a whole synthesis job runs inside one request (eager Celery)
    page.goto("/accounts/login/")
    page.fill("input[name=username]", "founder")
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url("**/")
    return page


def _fits(page, where: str, checked: dict) -> None:
    """axe-core's serious and critical findings on the page, and whether it scrolls sideways at 390 px."""
    checked[where] = blocking_violations(page)
    size = page.viewport_size
    page.set_viewport_size({"width": 390, "height": 844})
    overflow = page.evaluate("document.documentElement.scrollWidth - document.documentElement.clientWidth")
    page.set_viewport_size(size)
    assert overflow <= 1, f"{where} scrolls sideways by {overflow}px at 390px"


def test_a_new_admin_goes_through_the_first_steps_without_the_admin_site(new_admin, stub, eager, tmp_path):
    page = new_admin
    opened = []
    page.on("request", lambda request: opened.append(request.url))
    checked: dict[str, list] = {}

    # The dashboard says what to do first.
    steps = page.locator("#first-steps")
    expect(steps).to_contain_text("No endpoint has passed a test yet")
    _fits(page, "dashboard with first steps", checked)

    # 1. Connect an LLM: a profile for the scripted server, its key stored, then tested.
    steps.get_by_role("link", name="Connect an LLM").click()
    expect(page.locator("#no-endpoint")).to_be_visible()
    _fits(page, "/llm/endpoints/ (empty)", checked)
    page.click("#endpoint-new")
    expect(page.locator("#field-api_key")).to_be_hidden()  # the key comes from a variable until told otherwise
    _fits(page, "/llm/endpoints/new/", checked)
    page.fill("#id_name", "local")
    page.fill("#id_base_url", stub.url)
    page.fill("#id_model", "stub-model")
    page.get_by_label("a key stored here, encrypted").check()
    page.fill("#id_api_key", KEY)
    page.click("#endpoint-save-test")
    expect(page.locator("#probe")).to_contain_text("Connected.")
    expect(page.locator("#probe-table")).to_contain_text("json_schema")
    assert KEY not in page.content()
    profile = EndpointProfile.objects.get(name="local")
    assert profile.is_default and api_key_decrypt(profile.api_key_encrypted) == KEY
    assert all(request.headers.get("authorization") == f"Bearer {KEY}" for request in stub.requests)
    _fits(page, "/llm/endpoints/<id>/ after a test", checked)
    page.goto("/llm/endpoints/")
    expect(page.locator("#endpoints")).to_contain_text("connected")
    page.select_option("#id_judge", label="local")
    page.click("#stage-routes button[type=submit]")
    expect(page.locator(".messages")).to_contain_text("Routes saved")
    _fits(page, "/llm/endpoints/", checked)

    # 2. A domain, by form; its APIs from an OpenAPI document.
    page.goto("/")
    expect(page.locator("#step-llm")).to_contain_text("An endpoint answered its test")
    page.locator("#step-domain").get_by_role("link", name="Create a domain").click()
    _fits(page, "/domains/new/", checked)
    page.fill("#id_name", "shop")
    page.fill("#id_description", "A small online shop.")
    page.fill("#id_policy", "# Policy\n\n- Confirm before cancelling an order.")
    page.click("#catalog-create button[type=submit]")
    expect(page.locator("h1")).to_have_text("shop")
    page.get_by_role("link", name="Import APIs").click()
    expect(page.locator("input[name=api_domain]")).to_have_value("shop")
    document = tmp_path / "shop.json"
    document.write_text(json.dumps(OPENAPI))
    page.check("input[name=source][value=openapi]")
    page.set_input_files("input[name=document]", str(document))
    page.click("#api-import-btn")
    expect(page.locator("#api-import-result")).to_be_visible()
    assert set(Api.objects.filter(domain__name="shop").values_list("name", flat=True)) >= {"list_products"}

    # 3. A synthesis job, queued on its page; it runs to the end (in the request, with eager Celery).
    page.goto("/")
    page.locator("#step-job").get_by_role("link", name="Queue a job").click()
    page.fill("#id_domains", "shop")
    page.fill("#id_apis", "2")
    page.fill("#id_tasks", "2")
    page.fill("#id_rollouts", "1")
    page.click("#queue-form button[type=submit]")
    expect(page.locator("h1")).to_contain_text("Job")
    job = Job.objects.get(kind="synthesize")
    assert job.status == JobStatus.SUCCEEDED, job.error

    # 4. Two items reviewed, by keyboard in the review stream.
    page.goto("/")
    page.locator("#step-review").get_by_role("link", name="Review items").click()
    page.click("#start-reviewing")
    page.wait_for_selector("#stream-bar")
    for _ in range(2):
        heading = page.locator("h1").inner_text()
        page.keyboard.press("a")
        expect(page.locator("h1")).not_to_have_text(heading)
    assert Review.objects.filter(decision="accept").count() == 2

    # 5. A snapshot of what was accepted.
    page.goto("/")
    page.locator("#step-export").get_by_role("link", name="Export a snapshot").click()
    page.select_option("select[name=format]", "openai")
    page.click("#export-create")
    expect(page.locator("#snapshots tbody tr, #snapshots tr[id^=snapshot-]").first).to_contain_text("succeeded")
    assert Snapshot.objects.get().count == 2

    page.goto("/")
    expect(page.locator("#first-steps")).to_have_count(0)  # every step done: the panel is gone
    assert Domain.objects.filter(name="shop").exists()
    assert not [url for url in opened if "/admin/" in url]
    assert not any(checked.values()), describe({k: v for k, v in checked.items() if v})


def _refused_on_the_page(page, *, form: str, message: str) -> None:
    """The answer to a refused form is the page itself: the navigation, the form again, and the reason."""
    expect(page.locator("header.topbar")).to_be_visible()
    expect(page.locator(form)).to_be_visible()
    expect(page.locator("main")).to_contain_text(message)


CLEAR = """(form) => document.querySelectorAll(
  `${form} input:not([type=hidden]):not([type=radio]):not([type=checkbox]), ${form} textarea`
).forEach((input) => { input.value = ""; })"""


def _send(page, form: str) -> None:
    """Send the form as it is, past the browser's own checks, so that the server's answer is what is seen."""
    page.evaluate(f"document.querySelector({form!r}).noValidate = true")
    page.locator(f"{form} button[type=submit]").first.click()
    page.wait_for_load_state()


def test_every_new_form_refused_answers_with_the_page_and_what_to_do(new_admin):
    page = new_admin
    checked: dict[str, list] = {}

    # Before anything exists: each page says what is missing and links to where it is made.
    for url, notice, link in [
        ("/apis/new/", "There is no domain yet", "/domains/new/"),
        ("/tasks/new/", "There is no domain yet", "/domains/new/"),
        ("/queue/rollouts/", "There is no domain yet", "/domains/new/"),
        ("/queue/fidelity/", "No domain has a reference environment yet", "/domains/"),
        ("/queue/calibrate/", "Nobody has rated an item yet", "/calibration/assignments/"),
        ("/queue/amplify/", "No usable seed yet", "/seeds/upload/"),
    ]:
        page.goto(url)
        expect(page.locator("main")).to_contain_text(notice)
        assert page.locator(f"main a[href='{link}']").count() >= 1, url
        _fits(page, url, checked)

    # Sent empty.
    for url, form, message in [
        ("/llm/endpoints/new/", "#endpoint-form", "This field is required"),
        ("/users/new/", "#user-form", "This field is required"),
        ("/domains/new/", "#catalog-create", "This field is required"),
        ("/apis/new/", "#catalog-create", "This field is required"),
        ("/tasks/new/", "#catalog-create", "This field is required"),
        ("/apis/import/", "#api-import", "Choose a source"),
        ("/queue/synthesis/", "#queue-form", "This field is required"),
    ]:
        page.goto(url)
        page.evaluate(CLEAR, form)
        _send(page, form)
        _refused_on_the_page(page, form=form, message=message)
        _fits(page, f"{url} refused", checked)

    # Out of range.
    endpoint = {"#id_name": "x", "#id_model": "m", "#id_temperature": "9"}
    for url, form, fill, message in [
        ("/llm/endpoints/new/", "#endpoint-form", endpoint, "between 0 and 2"),
        ("/domains/new/", "#catalog-create", {"#id_name": "Not a slug!"}, "lower-case letters"),
        ("/queue/synthesis/", "#queue-form", {"#id_domains": "shop", "#id_apis": "0"}, "greater than or equal to 1"),
        ("/queue/synthesis/", "#queue-form", {"#id_domains": "shop", "#id_apis": "9999"}, "SIMIA_MAX_APIS_PER_DOMAIN"),
        ("/users/new/", "#user-form", {"#id_username": "ana", "#id_password1": "short"}, ""),
    ]:
        page.goto(url)
        if url == "/users/new/":
            page.get_by_label("Set it now").check()
            fill["#id_password2"] = "short"
            message = "too short"
        for selector, value in fill.items():
            page.fill(selector, value)
        _send(page, form)
        _refused_on_the_page(page, form=form, message=message)

    # Before its prerequisites: queued anyway, the refusal is said on the form.
    page.goto("/queue/calibrate/")
    _send(page, "#queue-form")
    _refused_on_the_page(page, form="#queue-form", message="nobody has rated an item yet")
    _fits(page, "/queue/calibrate/ refused", checked)

    assert not any(checked.values()), describe({k: v for k, v in checked.items() if v})
    assert not Domain.objects.exists() and not Job.objects.exists()
    # Nothing refused was written (asking the judge's route makes the default profile from the environment).
    assert not EndpointProfile.objects.filter(follows_environment=False).exists()
