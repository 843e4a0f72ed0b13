"""The Content-Security-Policy (script-src and style-src 'self', nothing inline) holds on the main pages in
Chromium: no page logs a violation, and htmx, the review page's script and Swagger UI still work."""

import pytest

from simia_web.catalog.models import Seed
from simia_web.llm.models import LLMCall
from tests.support.factories import make_job, make_trajectory, verdict

pytestmark = pytest.mark.browser

PAGES = [
    "/",
    "/review/",
    "/trajectories/{trajectory}/",
    "/agreement/",
    "/domains/",
    "/domains/{domain}/",
    "/apis/",
    "/tasks/",
    "/seeds/",
    "/seeds/{seed}/",
    "/queue/synthesis/",
    "/queue/rollouts/",
    "/queue/amplify/",
    "/jobs/",
    "/jobs/{job}/",
    "/llm/calls/{call}/",
    "/llm/endpoints/",
    "/llm/endpoints/new/",
    "/users/",
    "/users/new/",
    "/domains/new/",
    "/apis/new/",
    "/tasks/new/",
    "/api/docs/",
    "/admin/",
    "/admin/llm/endpointprofile/add/",
]


def test_main_pages_have_no_csp_violations(login):
    trajectory = make_trajectory(judge=verdict(passed=False, confidence=0.9))
    job = make_job()
    seed = Seed.objects.create(
        domain=trajectory.domain, source_format="openai", messages=trajectory.messages, content_hash="s"
    )
    call = LLMCall.objects.create(stage="judge", model="m", request_hash="h", request={"messages": []}, job=job)
    ids = {"trajectory": trajectory.pk, "domain": trajectory.domain.name, "seed": seed.pk, "job": job.pk}
    ids["call"] = call.pk
    page = login("admin")
    violations = []
    page.on(
        "console",
        lambda message: (
            violations.append((page.url, message.text)) if "Content Security Policy" in message.text else None
        ),
    )
    for url in PAGES:
        response = page.goto(url.format(**ids))
        assert response.ok, url
        page.wait_for_load_state("networkidle")
    page.goto("/api/docs/")
    page.wait_for_selector(".swagger-ui .info", timeout=15_000)  # Swagger UI ran from our static files
    assert violations == []
