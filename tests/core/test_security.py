"""Untrusted text stays inert on every page that shows it; CSRF is enforced; API keys are never stored or shown."""

import json

import pytest
from django.conf import settings
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authentication import SessionAuthentication
from rest_framework.settings import api_settings

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Api, Seed, Task
from simia_web.curation.models import RuleViolation, Trajectory
from simia_web.jobs.models import JobStatus
from simia_web.llm.client import LLMError, client_for_stage
from simia_web.llm.models import LLMCall
from tests.support.factories import TOOLS, make_job, make_trajectory, verdict
from tests.support.llm_stub import Reply

SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
PAYLOAD = f"{SCRIPT} {IMG}"
ESCAPED = ["&lt;script&gt;alert(1)&lt;/script&gt;", "&lt;img src=x onerror=alert(1)&gt;"]
RAW = ["<script>alert(1)", "<img src=x", "onerror=alert(1)>"]


def _messages(text: str) -> list[dict]:
    return [
        {"role": "system", "content": text},
        {"role": "user", "content": text},
        {
            "role": "assistant",
            "content": text,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "cancel_order", "arguments": json.dumps({"order_id": text})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": json.dumps({"note": text})},
        {"role": "assistant", "content": text},
    ]


@pytest.fixture
def hostile(db, users):
    """One of everything an LLM writes (or a seed file brings), each carrying the payload."""
    job = make_job(status=JobStatus.FAILED)
    job.error = PAYLOAD
    job.save(update_fields=["error"])
    t0 = make_trajectory(judge=verdict(passed=False, rationale=PAYLOAD, scores={"ok": 0.1}), job=job)
    domain = t0.domain
    domain.description = PAYLOAD
    domain.policy = PAYLOAD
    domain.save(update_fields=["description", "policy"])
    task = Task.objects.create(domain=domain, instruction=PAYLOAD, expected_outcome=PAYLOAD)
    t = make_trajectory(
        judge=verdict(passed=False, rationale=PAYLOAD, scores={"ok": 0.1}),
        job=job,
        messages=_messages(PAYLOAD),
        task=task,
    )
    after = {"orders": {"W1": {"status": PAYLOAD}}}
    Trajectory.objects.filter(pk=t.pk).update(
        steps={
            "2": {
                "patch": [{"op": "replace", "path": "/orders/W1/status", "value": PAYLOAD}],
                "state_after": after,
                "errors": [PAYLOAD],
            }
        },
        final_state=after,
    )
    RuleViolation.objects.create(trajectory=t, code="unknown_tool", message_index=1, detail=PAYLOAD)
    api = Api.objects.create(
        domain=domain, name="cancel_order", description=PAYLOAD, parameters=TOOLS[0]["function"]["parameters"]
    )
    seed = Seed.objects.create(domain=domain, source_format="openai", messages=_messages(PAYLOAD), tools=TOOLS)
    call = LLMCall.objects.create(
        stage="judge",
        model="m",
        request_hash="x",
        request={"messages": [{"role": "user", "content": PAYLOAD}]},
        response={"message": {"role": "assistant", "content": PAYLOAD}},
        error=PAYLOAD,
        error_kind="invalid_json",
        job=job,
    )
    return {"t": t, "task": task, "api": api, "seed": seed, "call": call, "job": job, "domain": domain}


PAGES = [
    "/trajectories/{t.pk}/",
    "/tasks/",
    "/tasks/{task.pk}/",
    "/apis/",
    "/apis/{api.pk}/",
    "/domains/",
    "/domains/{domain.name}/",
    "/seeds/{seed.pk}/",
    "/jobs/{job.pk}/",
]
ADMIN_PAGES = ["/llm/calls/{call.pk}/"]


def _assert_inert(html: str, where: str) -> None:
    for raw in RAW:
        assert raw not in html, (where, raw)
    assert any(escaped in html for escaped in ESCAPED), (where, "the text is not shown at all")


@pytest.mark.parametrize("role", ["annotator", "curator"])  # curators also get the edit forms
@pytest.mark.parametrize("url", PAGES)
def test_payload_is_escaped(client_for, hostile, role, url):
    url = url.format(**hostile)
    response = client_for(role).get(url)
    assert response.status_code == 200
    _assert_inert(response.content.decode(), url)


@pytest.mark.parametrize("url", ADMIN_PAGES)
def test_payload_is_escaped_on_admin_pages(client_for, hostile, url):
    url = url.format(**hostile)
    response = client_for("admin").get(url)
    assert response.status_code == 200
    _assert_inert(response.content.decode(), url)


def test_every_text_of_the_trajectory_page_is_escaped(client_for, hostile):
    html = client_for("annotator").get(f"/trajectories/{hostile['t'].pk}/").content.decode()
    for escaped in ESCAPED:
        # messages, tool arguments and results, patch, state diff, step error, violation, rationale, task, editor
        assert html.count(escaped) >= 10, escaped


def test_refused_decision_partial_is_escaped(client_for, hostile):
    """The editor answered after a conflicting save shows what was typed again."""
    t = hostile["t"]
    response = client_for("annotator").post(
        f"/trajectories/{t.pk}/edit/",
        {"version": t.version + 5, "msg": ["0"], "role-0": "user", "content-0": PAYLOAD},
    )
    assert response.status_code == 409
    _assert_inert(response.content.decode(), "editor after a conflict")


# The one module that marks text safe, and why it may: Markdown rendered with raw HTML off holds only the markup
# Markdown makes (tests/exports/test_export_page.py checks that a script and a javascript: link in the text stay inert).
MARKS_SAFE = {"simia_web/core/markdown.py"}


def test_no_template_or_view_marks_text_safe():
    """Static guard: nothing opts out of autoescaping, but the Markdown renderer."""
    root = settings.BASE_DIR
    suspicious = ("|safe", "mark_safe", "autoescape off", "SafeString", "innerHTML", "insertAdjacentHTML", "safeseq")
    found = []
    for folder, patterns in (("templates", "*.html"), ("static", "*.js"), ("simia_web", "*.py")):
        for path in (root / folder).rglob(patterns):
            if str(path.relative_to(root)) in MARKS_SAFE:
                continue
            text = path.read_text()
            found += [f"{path.relative_to(root)}: {word}" for word in suspicious if word in text]
    assert found == []


# ---------------------------------------------------------------- CSRF


def test_csrf_middleware_is_on_and_no_page_is_exempt():
    assert "django.middleware.csrf.CsrfViewMiddleware" in settings.MIDDLEWARE
    # DRF views are exempt from the middleware by design; SessionAuthentication then enforces CSRF for sessions.
    assert SessionAuthentication in api_settings.DEFAULT_AUTHENTICATION_CLASSES

    def walk(resolver):
        for entry in resolver.url_patterns:
            if isinstance(entry, URLResolver):
                yield from walk(entry)
            elif isinstance(entry, URLPattern):
                yield entry

    for pattern in walk(get_resolver()):
        view_class = getattr(pattern.callback, "cls", None)
        if view_class is not None:  # a DRF view: session users go through SessionAuthentication's CSRF check
            for auth in view_class.authentication_classes:
                if issubclass(auth, SessionAuthentication):
                    assert auth.enforce_csrf is SessionAuthentication.enforce_csrf, (pattern.name, auth)
            continue
        assert not getattr(pattern.callback, "csrf_exempt", False), pattern.name


@pytest.fixture
def csrf_client(users):
    client = Client(enforce_csrf_checks=True)
    client.force_login(users["curator"])
    return client


def test_page_post_without_csrf_token_is_refused(csrf_client, hostile):
    job = make_job(status=JobStatus.RUNNING)
    assert csrf_client.post(f"/jobs/{job.pk}/cancel/").status_code == 403
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    # With the token (as the page and htmx send it) the same request goes through.
    csrf_client.get(f"/jobs/{job.pk}/")
    token = csrf_client.cookies["csrftoken"].value
    assert csrf_client.post(f"/jobs/{job.pk}/cancel/", HTTP_X_CSRFTOKEN=token).status_code == 302
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED


def test_api_write_by_session_without_csrf_token_is_refused(csrf_client, users, hostile):
    job = make_job(status=JobStatus.RUNNING)
    response = csrf_client.post(f"/api/v1/jobs/{job.pk}/cancel/", content_type="application/json")
    assert response.status_code == 403 and "CSRF" in response.json()["detail"]
    job.refresh_from_db()
    assert job.status == JobStatus.RUNNING
    # Token clients carry no cookie, so CSRF does not apply to them.
    token = {"HTTP_AUTHORIZATION": f"Token {user_token(user=users['curator'])}"}
    assert Client(enforce_csrf_checks=True).post(f"/api/v1/jobs/{job.pk}/cancel/", **token).status_code == 200


# ---------------------------------------------------------------- secrets


def test_api_key_is_sent_but_never_stored_or_shown(llm_stub, monkeypatch, client_for, hostile):
    secret = "sk-audit-0123456789abcdef"
    monkeypatch.setenv(llm_stub.profile.api_key_env, secret)
    llm_stub.responder = lambda request: Reply(content="fine")
    reply = client_for_stage("judge", job_id=hostile["job"].pk).chat(messages=[{"role": "user", "content": "hi"}])
    assert llm_stub.requests[-1].headers["authorization"] == f"Bearer {secret}"  # it did go out

    call = LLMCall.objects.get(pk=reply.call_ids[-1]) if reply.call_ids else LLMCall.objects.latest("id")
    stored = json.dumps([call.request, call.response, call.error])
    assert secret not in stored and "authorization" not in stored.lower()
    assert not any(f.name in ("api_key", "key", "secret") for f in llm_stub.profile._meta.fields)

    client = client_for("admin")
    for url in (f"/llm/calls/{call.pk}/", f"/jobs/{hostile['job'].pk}/", "/api/v1/llm/profiles/"):
        body = client.get(url).content.decode()
        assert secret not in body, url
        assert "authorization" not in body.lower(), url
    assert secret not in client.get(f"/admin/llm/endpointprofile/{llm_stub.profile.pk}/change/").content.decode()


def test_api_key_echoed_by_the_server_is_not_stored(llm_stub, monkeypatch):
    """Some OpenAI-compatible servers quote the key they refused; it must not reach LLMCall.error or Job.error."""
    secret = "sk-audit-echo-0123456789"
    monkeypatch.setenv(llm_stub.profile.api_key_env, secret)
    llm_stub.responder = lambda request: Reply(status=401, error_message=f"Incorrect API key provided: {secret}")
    with pytest.raises(LLMError) as failure:
        client_for_stage("judge").chat(messages=[{"role": "user", "content": "hi"}])
    assert secret not in str(failure.value)
    assert not LLMCall.objects.filter(error__contains=secret).exists()
