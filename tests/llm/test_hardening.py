"""Hostile input and access, case by case (job parameter caps are tested with the job serializers): each refusal
is a clean 4xx naming the field and the limit, never a 500, and who sees what follows the roles."""

import json
import os
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from django.conf import settings
from django.contrib.auth.password_validation import validate_password
from django.contrib.staticfiles import finders
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

from simia_web.accounts.services import user_create, user_token
from simia_web.catalog.models import Domain, Seed, Task
from simia_web.core.errors import ValidationFailed
from simia_web.core.schemas import Validator, first_error, schema_error
from simia_web.environments.models import EnvSession
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import EndpointProfile, LLMCall
from simia_web.llm.validation import api_key_read, url_redacted
from tests.conftest import PASSWORD
from tests.support.factories import make_trajectory

ROOT = Path(__file__).resolve().parents[2]


def api(users, role: str) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=users[role])}")
    return client


# ---------------------------------------------------------------- ReDoS


def test_schema_patterns_run_in_linear_time():
    schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(a+)+$"}}}
    assert Validator.VALIDATORS["pattern"] is not jsonschema.Draft202012Validator.VALIDATORS["pattern"]
    # 5,000 characters: exponential backtracking would never finish this.
    assert "does not match" in first_error(schema, {"x": "a" * 5000 + "!"})
    assert first_error(schema, {"x": "aaa"}) is None
    by_key = {"type": "object", "patternProperties": {"^(b+)+$": {"type": "integer"}}}
    assert "is not of type 'integer'" in first_error(by_key, {"b" * 5000: "x"})


@pytest.mark.parametrize("pattern", [r"^(a)\1$", "(?=a)", "(?<!a)b"])
def test_patterns_that_need_backtracking_are_refused(pattern):
    assert "cannot run in linear time" in schema_error({"type": "string", "pattern": pattern})
    assert "cannot run in linear time" in schema_error({"patternProperties": {pattern: {}}})


# ---------------------------------------------------------------- pages that stay small


def test_large_seed_page_is_paged_and_cut(client_for):
    domain = Domain.objects.create(name="big")
    text = "x" * 50_000
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}:{text}"} for i in range(2000)]
    seed = Seed.objects.create(domain=domain, source_format="openai", messages=messages, content_hash="h")
    client = client_for("curator")
    body = client.get(f"/seeds/{seed.pk}/").content.decode()
    assert len(body) < 500_000, len(body)  # 100 MB of messages
    assert "Page 1 of 40" in body and "Show more" in body and 'name="messages"' not in body
    later = client.get(f"/seeds/{seed.pk}/?page=3&full=101").content.decode()
    assert f"101:{text}" in later and f"102:{text}" not in later and len(later) < 500_000
    assert client.post(f"/seeds/{seed.pk}/", {"version": 1, "messages": "[]"}).status_code == 403


# ---------------------------------------------------------------- 500s become refusals


HOSTILE_BODIES = {
    "deep": "[" * 100_000 + "]" * 100_000,
    "digits": '{"n": ' + "1" * 5000 + "}",
    "2**70": '{"n": ' + str(2**70) + "}",
    "nan": '{"n": NaN}',
    "inf": '{"n": 1e999}',
}


@pytest.mark.parametrize("body", list(HOSTILE_BODIES.values()), ids=list(HOSTILE_BODIES))
@pytest.mark.parametrize("url", ["/api/v1/jobs/", "/api/v1/envs/", "/api/v1/snapshots/"])
def test_hostile_json_bodies_are_400(users, url, body):
    response = api(users, "curator").post(url, body, content_type="application/json")
    assert response.status_code == 400, response.content
    assert any(word in response.content.decode() for word in ("nested", "64 bits", "not a JSON number", "range"))


def test_job_kind_of_the_wrong_type_is_400(users):
    response = api(users, "curator").post("/api/v1/jobs/", {"kind": ["synthesize"]}, format="json")
    assert response.status_code == 400 and "kind" in response.json()


@pytest.mark.parametrize("url", ["/api/v1/trajectories/", "/api/v1/jobs/", "/api/v1/seeds/", "/api/v1/envs/"])
@pytest.mark.parametrize("cursor", ["garbage", "cD1hYmM=", "cD05OTk5OTk5OTk5OTk5OTk5OTk5OTk5OQ==", "cj0xJnA9eA=="])
def test_tampered_cursor_is_400(users, url, cursor):
    """Base64 of `p=abc`, a position beyond 64 bits and `r=1&p=x`: each used to reach the query."""
    response = api(users, "curator").get(url, {"cursor": cursor})
    assert response.status_code == 400 and "cursor" in response.json()


@pytest.mark.parametrize("url", ["/api/v1/trajectories/", "/api/v1/tasks/", "/api/v1/apis/", "/api/v1/jobs/"])
def test_long_query_text_is_400(users, url):
    response = api(users, "curator").get(url, {"q": "a" * 60_000})
    assert response.status_code == 400 and "at most 500 characters" in response.json()["q"][0]


@pytest.mark.parametrize("text", list(HOSTILE_BODIES.values()), ids=list(HOSTILE_BODIES))
def test_editing_a_tool_call_with_hostile_json_is_refused(client_for, text):
    from tests.curation.test_review import editor_post

    trajectory = make_trajectory()
    index = next(i for i, m in enumerate(trajectory.messages) if m.get("tool_calls"))
    response = client_for("annotator").post(
        f"/trajectories/{trajectory.pk}/edit/", editor_post(trajectory, **{f"call-{index}-0-args": text})
    )
    assert response.status_code < 500 and "Not valid JSON" in response.content.decode()
    trajectory.refresh_from_db()
    assert trajectory.version == 1


def test_catalog_json_fields_refuse_hostile_json(client_for):
    domain = Domain.objects.create(name="shop")
    response = client_for("curator").post(
        f"/domains/{domain.name}/",
        {"version": 1, "state_schema": '{"type": "object"}', "initial_state": '{"a": ' * 600 + "1" + "}" * 600},
    )
    assert response.status_code == 200 and "nested deeper than 64 levels" in response.content.decode()
    domain.refresh_from_db()
    assert domain.version == 1 and domain.initial_state == {}


# ---------------------------------------------------------------- who sees what


def test_endpoint_profiles_are_for_admins_with_credentials_masked(users):
    EndpointProfile.objects.create(
        name="leaky", model="m", base_url="https://user:pass@llm.example.com/v1?api-key=sk-123&api-version=2024"
    )
    for role in ("annotator", "curator"):
        assert api(users, role).get("/api/v1/llm/profiles/").status_code == 403
    body = api(users, "admin").get("/api/v1/llm/profiles/").content.decode()
    assert "pass" not in body and "sk-123" not in body and "api-version=2024" in body
    assert url_redacted("https://llm.example.com/v1") == "https://llm.example.com/v1"


@pytest.mark.parametrize(
    "url", ["https://user:pass@llm.example.com/v1", "https://llm.example.com/v1?key=x", "http://h/v1?access_token=t"]
)
def test_credentials_in_base_url_are_refused_on_save(db, url):
    with pytest.raises(ValidationError) as refused:
        EndpointProfile(name="p", model="m", base_url=url).full_clean()
    assert "base_url" in refused.value.message_dict


@pytest.mark.parametrize("name", ["SECRET_KEY", "DATABASE_URL", "HOME", "PATH"])
def test_key_variable_must_be_an_api_key(db, name, settings, monkeypatch):
    with pytest.raises(ValidationError) as refused:
        EndpointProfile(name="p", model="m", api_key_env=name).full_clean()
    assert "api_key_env" in refused.value.message_dict
    monkeypatch.setenv(name, "do-not-send")
    assert api_key_read(name) == ""
    settings.SIMIA_ALLOWED_KEY_ENVS = [name]
    assert api_key_read(name) == ("" if name in ("SECRET_KEY", "DATABASE_URL") else "do-not-send")


def test_client_never_sends_a_forbidden_variable(llm_stub, monkeypatch):
    monkeypatch.setenv("SECRET_KEY", "the-django-secret")
    EndpointProfile.objects.filter(pk=llm_stub.profile.pk).update(api_key_env="SECRET_KEY")  # set before the rule
    client_for_stage("judge").chat(messages=[{"role": "user", "content": "hi"}])
    assert llm_stub.requests[0].headers["authorization"] == "Bearer not-needed"
    assert "the-django-secret" not in json.dumps(dict(llm_stub.requests[0].headers))


def test_llm_calls_are_for_admins_and_the_rl_session_owner(client_for, users):
    call = LLMCall.objects.create(stage="simulator", model="m", request_hash="h", request={"messages": []})
    other = LLMCall.objects.create(stage="judge", model="m", request_hash="i", request={"messages": []})
    domain = Domain.objects.create(name="shop")
    task = Task.objects.create(domain=domain, instruction="Cancel order W1.")
    EnvSession.objects.create(domain=domain, task=task, created_by=users["curator"], llm_call_ids=[call.pk])
    assert client_for("annotator").get(f"/llm/calls/{call.pk}/").status_code == 403
    assert client_for("curator").get(f"/llm/calls/{call.pk}/").status_code == 200
    assert client_for("curator").get(f"/llm/calls/{other.pk}/").status_code == 403
    assert client_for("admin").get(f"/llm/calls/{other.pk}/").status_code == 200


# ---------------------------------------------------------------- throttling and passwords


@pytest.mark.parametrize("url", ["/accounts/login/", "/admin/login/"])
def test_login_locks_out_after_repeated_failures(client, users, settings, url):
    for _ in range(settings.AXES_FAILURE_LIMIT):
        client.post(url, {"username": "admin", "password": "wrong-password"})
    response = client.post(url, {"username": "admin", "password": PASSWORD})
    assert response.status_code == 429
    assert "_auth_user_id" not in client.session


def test_login_still_works_before_the_limit(client, users):
    client.post("/accounts/login/", {"username": "curator", "password": "wrong-password"})
    response = client.post("/accounts/login/", {"username": "curator", "password": PASSWORD})
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(users["curator"].pk)


def test_wrong_tokens_are_throttled_even_before_a_right_one(users, settings):
    limit = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["bad_token"].split("/")[0])
    client = APIClient()
    for i in range(limit):
        client.credentials(HTTP_AUTHORIZATION=f"Token wrong{i:036d}")
        assert client.get("/api/v1/me/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION="Token wrong")
    assert client.get("/api/v1/me/").status_code == 429
    client.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=users['curator'])}")
    assert client.get("/api/v1/me/").status_code == 429


@pytest.mark.parametrize("password", ["password", "12345678", "1234567890", "curator-1"])
def test_weak_passwords_are_refused(db, password):
    with pytest.raises(ValidationFailed):
        user_create(username="curator", role="curator", password=password)
    with pytest.raises(ValidationError):
        validate_password(password)


def test_generated_admin_password_passes_the_validators(db, capsys):
    from django.core.management import call_command

    call_command("ensure_admin")
    assert "Admin login: admin / " in capsys.readouterr().out


# ---------------------------------------------------------------- deploy settings


PRODUCTION = {
    "DATABASE_URL": "postgres://simia:pw@db:5432/simia",
    "CELERY_BROKER_URL": "redis://redis:6379/0",
    "SECRET_KEY": "a-long-random-production-secret-key-0123456789-abcdefghijklmnopqrstuvwxyz",
    "ALLOWED_HOSTS": "simia.example.com",
    "OPENAI_BASE_URL": "http://vllm:8000/v1",
    "OPENAI_API_KEY": "sk-production",
}


def test_check_deploy_is_clean_with_the_readme_environment(tmp_path):
    # Not the test run's own switches (the browser tests allow async-unsafe calls for Playwright).
    test_only = ("DEBUG", "SIMIA_HTTPS", "DJANGO_SETTINGS_MODULE", "DJANGO_ALLOW_ASYNC_UNSAFE")
    env = {k: v for k, v in os.environ.items() if k not in test_only}
    env.update(PRODUCTION, SIMIA_VAR_DIR=str(tmp_path))
    # The model checks read the database server's version (generated columns), so the check needs a server that
    # answers: this machine's, in place of the README's `db` host.
    db = settings.DATABASES["default"]
    if db["ENGINE"].endswith("postgresql"):
        server = f"{db['USER'] or 'postgres'}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}"
        env["DATABASE_URL"] = f"postgres://{server}/postgres"
    else:
        env.pop("DATABASE_URL")
    result = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "no issues" in result.stdout


def test_pages_send_a_content_security_policy(client_for):
    response = client_for("annotator").get("/")
    policy = response["Content-Security-Policy"]
    assert "script-src 'self'" in policy and "style-src 'self'" in policy and "unsafe-inline" not in policy


def test_swagger_ui_comes_from_our_static_files(client_for):
    client = client_for("annotator")
    body = client.get("/api/docs/").content.decode()
    assert "cdn" not in body.lower() and "<style" not in body and "<script>" not in body
    assert "/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js" in body
    assert finders.find("drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js")
    script = client.get("/api/docs/?script=")
    assert script.status_code == 200 and "SwaggerUIBundle" in script.content.decode()


def test_forwarded_for_headers_do_not_reset_the_token_throttle(users, settings):
    limit = int(settings.REST_FRAMEWORK["DEFAULT_THROTTLE_RATES"]["bad_token"].split("/")[0])
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token wrong")
    statuses = [client.get("/api/v1/me/", HTTP_X_FORWARDED_FOR=f"10.0.0.{i}").status_code for i in range(limit + 1)]
    assert statuses[-1] == 429


# ---------------------------------------------------------------- endpoints and the profiles a job names


def test_a_job_naming_a_profile_that_is_not_there_is_refused_at_submission(users):
    from simia_web.jobs.models import Job

    client = api(users, "curator")
    response = client.post(
        "/api/v1/jobs/", {"kind": "amplify", "count": 1, "profiles": {"agent": 999999}}, format="json"
    )
    assert response.status_code == 400, response.content
    assert response.json()["profiles"] == ["agent: no endpoint profile with id 999999"]
    assert not Job.objects.exists()
    profile = EndpointProfile.objects.create(name="judge-endpoint", model="m", base_url="http://127.0.0.1:9/v1")
    known = client.post(
        "/api/v1/jobs/", {"kind": "amplify", "count": 1, "profiles": {"judge": profile.pk}}, format="json"
    )
    assert known.status_code == 400 and list(known.json()) == ["seed"]  # the profile passed; no seeds yet


LINK_LOCAL = [
    "http://169.254.169.254/latest/meta-data/",
    "http://2852039166/v1",  # 169.254.169.254 spelled as one number
    "http://[fe80::1]:8000/v1",
    "http://[::ffff:169.254.169.254]/v1",
    "http://metadata.google.internal/v1",
    "http://100.100.100.200/v1",
]


@pytest.mark.parametrize("url", LINK_LOCAL)
def test_link_local_and_metadata_endpoints_are_refused_unless_allowed(db, settings, url):
    from simia_web.llm.validation import profile_problems

    problems = profile_problems(base_url=url, api_key_env="OPENAI_API_KEY")
    assert "link-local or cloud metadata" in problems["base_url"] or "metadata service" in problems["base_url"]
    settings.SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS = True
    assert profile_problems(base_url=url, api_key_env="OPENAI_API_KEY") == {}


@pytest.mark.parametrize("url", ["http://127.0.0.1:8089/v1", "https://api.openai.com/v1", "http://10.0.0.5:8000/v1"])
def test_ordinary_endpoints_are_allowed(db, url):
    from simia_web.llm.validation import profile_problems

    assert profile_problems(base_url=url, api_key_env="OPENAI_API_KEY") == {}


LEAKY_URL = "http://agent:s3cr3t-pass@127.0.0.1:9/v1?api-key=sk-leaked-123&api-version=2024"


def test_credentials_in_openai_base_url_are_masked_everywhere_shown(client_for, users, settings):
    from simia_web.jobs.models import Job, JobStatus
    from simia_web.llm.client import LLMError
    from simia_web.llm.selectors import profile_default

    settings.OPENAI_BASE_URL = LEAKY_URL
    settings.SIMIA_LLM_MAX_ATTEMPTS = 1
    settings.SIMIA_LLM_ATOMIC_BLOCKS_ALLOWED = 1  # the test's own transaction
    profile = profile_default()
    job = Job.objects.create(kind="rollout", status=JobStatus.FAILED, params={}, stage="rollout", error="x")
    with pytest.raises(LLMError):
        client_for_stage("judge", job_id=job.pk).chat(messages=[{"role": "user", "content": "hi"}])

    admin = client_for("admin")
    pages = [
        admin.get("/admin/llm/endpointprofile/").content,
        admin.get(f"/admin/llm/endpointprofile/{profile.pk}/change/").content,
        admin.get(f"/jobs/{job.pk}/").content,
        api(users, "admin").get("/api/v1/llm/profiles/").content,
        api(users, "admin").get(f"/api/v1/jobs/{job.pk}/").content,
        *[call.error.encode() for call in LLMCall.objects.all()],
    ]
    for page in pages:
        assert b"s3cr3t" not in page and b"sk-leaked" not in page, page[:2000]
    assert b"127.0.0.1:9" in pages[0] and b"api-version=2024" in pages[3]
    assert LLMCall.objects.filter(job=job, error_kind="connection_error").exists()
