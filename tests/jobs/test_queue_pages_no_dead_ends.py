"""No dead ends on the queue pages: a kind's refusal is shown on its form, an empty list of choices says why and
links to where it is filled, a prerequisite not met is said before the form is sent, every field has help text,
and the endpoint profiles per stage are lists, not JSON ids."""

import pytest
from django.test import RequestFactory

from simia_web.catalog.models import Domain
from simia_web.core.errors import HeldByOther
from simia_web.core.middleware import RefusalMiddleware
from simia_web.jobs.models import Job
from simia_web.llm.models import EndpointProfile

QUEUE_PAGES = ["/queue/synthesis/", "/queue/rollouts/", "/queue/amplify/", "/queue/fidelity/", "/queue/calibrate/"]


def test_calibrate_before_anyone_rated_is_said_on_the_page(client_for):
    client = client_for("curator")
    page = client.get("/queue/calibrate/").content.decode()
    assert "Nobody has rated an item yet" in page and 'href="/calibration/assignments/"' in page
    refused = client.post("/queue/calibrate/", {"prompt_version": "judge-v4"})
    assert refused.status_code == 400
    text = refused.content.decode()
    assert 'class="topbar"' in text and "nobody has rated an item yet" in text and 'id="queue-form"' in text
    assert not Job.objects.exists()


def test_fidelity_says_why_its_domain_list_is_empty(client_for):
    Domain.objects.create(name="shop")
    page = client_for("curator").get("/queue/fidelity/").content.decode()
    assert "No domain has a reference environment yet" in page and 'href="/domains/"' in page


def test_rollouts_without_a_domain_link_to_creating_one(client_for):
    page = client_for("curator").get("/queue/rollouts/").content.decode()
    assert "There is no domain yet" in page and 'href="/domains/new/"' in page
    Domain.objects.create(name="shop")
    page = client_for("curator").get("/queue/rollouts/").content.decode()
    assert "No domain has a valid task yet" in page and 'href="/tasks/new/"' in page


def test_amplify_without_seeds_links_to_the_upload(client_for):
    page = client_for("curator").get("/queue/amplify/").content.decode()
    assert "No usable seed yet" in page and 'href="/seeds/upload/"' in page


@pytest.mark.parametrize("url", QUEUE_PAGES)
def test_every_field_has_help_text(client_for, url):
    response = client_for("curator").get(url)
    form = response.context["form"]
    missing = [name for name, field in form.fields.items() if not field.help_text]
    assert missing == [], (url, missing)
    assert "Apis" not in response.content.decode()


def _filled(client, url: str, **values) -> dict:
    """The queue form as the page fills it in, with `values` typed over it."""
    form = client.get(url).context["form"]
    data = {field.html_name: field.value() for field in form if field.value() not in (None, "")}
    return {**data, **values}


def test_profiles_are_chosen_from_lists(client_for, settings):
    judge = EndpointProfile.objects.create(name="big-judge", model="m")
    client = client_for("curator")
    page = client.get("/queue/synthesis/").content.decode()
    assert 'name="profiles__judge"' in page and "big-judge" in page
    assert 'name="profiles"' not in page
    data = _filled(client, "/queue/synthesis/", domains="shop", apis=2, tasks=1, profiles__judge=judge.pk)
    response = client.post("/queue/synthesis/", data)
    assert response.status_code == 302, response.content.decode()[-3000:]
    assert Job.objects.get().params["profiles"] == {"judge": judge.pk}


def test_out_of_range_is_said_on_the_form(client_for):
    client = client_for("curator")
    response = client.post("/queue/synthesis/", _filled(client, "/queue/synthesis/", domains="shop", apis=0))
    assert response.status_code == 400
    text = response.content.decode()
    assert 'id="field-apis"' in text and "greater than or equal to 1" in text
    assert not Job.objects.exists()


def test_a_refusal_no_page_explains_is_a_page_for_a_browser(client_for, users):
    request = RequestFactory().get("/x/", HTTP_ACCEPT="text/html", HTTP_REFERER="http://testserver/review/")
    request.user = users["annotator"]
    response = RefusalMiddleware(lambda r: None).process_exception(request, HeldByOther("ann has it.", version=2))
    text = response.content.decode()
    assert response.status_code == 409 and 'class="topbar"' in text and "Ann has it." in text
    assert 'href="http://testserver/review/"' in text


def test_the_queued_message_goes_once_the_job_has_ended(client_for):
    from simia_web.jobs.models import JobStatus

    job = Job.objects.create(kind="synthesize", params={}, status=JobStatus.SUCCEEDED)
    client = client_for("annotator")
    ended = client.get(f"/jobs/{job.pk}/progress/?part=head", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="messages" hx-swap-oob="delete"' in ended
    Job.objects.filter(pk=job.pk).update(status=JobStatus.RUNNING)
    running = client.get(f"/jobs/{job.pk}/progress/?part=head", HTTP_HX_REQUEST="true").content.decode()
    assert "hx-swap-oob" not in running
    assert "hx-swap-oob" not in client.get(f"/jobs/{job.pk}/").content.decode()


def test_every_page_has_an_icon(client_for):
    page = client_for("annotator").get("/").content.decode()
    assert 'rel="icon" href="/static/favicon.svg"' in page


def test_favicon_ico_is_served_to_anyone(client, db):
    """Clients that ask for /favicon.ico by convention (no page's link read) get the icon, not a 404."""
    response = client.get("/favicon.ico")
    assert response.status_code == 200 and response["Content-Type"] == "image/x-icon"
    assert b"".join(response.streaming_content)[:4] == b"\x00\x00\x01\x00"  # an ICO file's header
    assert "max-age" in response["Cache-Control"]
    assert client.head("/favicon.ico").status_code == 200
    assert client.post("/favicon.ico").status_code == 405
