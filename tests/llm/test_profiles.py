"""Which endpoint a stage uses, and how its API key is found."""

import pytest
from django.db import transaction

from simia_web.llm.client import client_for_stage
from simia_web.llm.limits import endpoint_limiter
from simia_web.llm.models import EndpointProfile, LLMCall, StageRoute
from simia_web.llm.selectors import profile_cache_clear, profile_default, profile_for_stage

from .conftest import ask


@pytest.fixture
def profiles(db):
    EndpointProfile.objects.all().delete()
    return {
        "default": EndpointProfile.objects.create(name="default", model="base", is_default=True),
        "judge": EndpointProfile.objects.create(name="big", model="big-judge"),
        "job": EndpointProfile.objects.create(name="job", model="job-choice"),
    }


def test_explicit_profile_beats_route_beats_default(profiles):
    StageRoute.objects.create(stage="judge", profile=profiles["judge"])
    assert profile_for_stage("judge", profiles["job"].pk) == profiles["job"]
    assert profile_for_stage("judge") == profiles["judge"]
    assert profile_for_stage("agent") == profiles["default"]
    assert client_for_stage("judge", job_id=None).profile == profiles["judge"]
    assert client_for_stage("agent", profile_id=profiles["job"].pk).profile == profiles["job"]


def test_default_profile_is_built_from_the_environment_once(db, settings):
    EndpointProfile.objects.all().delete()
    settings.OPENAI_BASE_URL = "http://llm.internal:8000/v1"
    settings.SIMIA_MODEL = "qwen-7b"
    profile = profile_for_stage("simulator")
    assert (profile.base_url, profile.model, profile.api_key_env, profile.is_default) == (
        "http://llm.internal:8000/v1",
        "qwen-7b",
        "OPENAI_API_KEY",
        True,
    )
    assert profile_default() == profile and EndpointProfile.objects.count() == 1


def test_default_profile_creation_survives_a_taken_name_inside_a_transaction(db):
    EndpointProfile.objects.all().delete()
    EndpointProfile.objects.create(name="default", model="someone-elses")
    with transaction.atomic():
        profile = profile_default()
        assert profile.is_default and profile.name != "default"
        assert EndpointProfile.objects.count() == 2  # the transaction is still usable


def test_api_key_comes_from_the_named_variable_and_is_never_stored(stub, monkeypatch):
    monkeypatch.setenv("SHOP_LLM_API_KEY", "sk-test-secret-123")
    stub.profile.api_key_env = "SHOP_LLM_API_KEY"
    stub.profile.save()
    ask()
    assert stub.requests[0].headers["authorization"] == "Bearer sk-test-secret-123"
    stored = [str(list(EndpointProfile.objects.values())), str(list(LLMCall.objects.values()))]
    assert not any("sk-test-secret-123" in text for text in stored)


def test_a_missing_key_variable_still_reaches_keyless_servers(stub, monkeypatch):
    monkeypatch.delenv("NO_SUCH_KEY", raising=False)
    stub.profile.api_key_env = "NO_SUCH_KEY"
    stub.profile.save()
    assert ask().data == {"answer": 42}
    assert stub.requests[0].headers["authorization"].startswith("Bearer ")


def test_stub_lists_its_models(stub):
    import openai

    listing = openai.OpenAI(base_url=stub.url, api_key="x").models.list()
    assert [m.id for m in listing.data] == ["stub-model"]


def test_the_default_profile_follows_the_environment_until_told_not_to(db, settings):
    EndpointProfile.objects.all().delete()
    settings.OPENAI_BASE_URL, settings.SIMIA_MODEL = "http://llm.internal:8000/v1", "qwen-7b"
    made = profile_default()
    settings.OPENAI_BASE_URL, settings.SIMIA_MODEL = "http://vllm.internal:8000/v1", "llama-70b"
    moved = profile_default()
    assert moved.pk == made.pk and (moved.base_url, moved.model) == ("http://vllm.internal:8000/v1", "llama-70b")
    assert EndpointProfile.objects.get(pk=made.pk).model == "qwen-7b"  # a read does not write the row
    EndpointProfile.objects.filter(pk=made.pk).update(follows_environment=False, model="set-by-hand")
    settings.SIMIA_MODEL = "ignored"
    assert profile_default().model == "set-by-hand"


def test_a_profile_that_follows_the_environment_does_so_however_a_stage_finds_it(db, settings):
    """Each worker machine sends to its own OPENAI_BASE_URL, also when a job names the profile by id or a
    stage's route names it: the row keeps the values of the machine that made it."""
    EndpointProfile.objects.all().delete()
    settings.OPENAI_BASE_URL, settings.SIMIA_MODEL = "http://made-here:8000/v1", "qwen-7b"
    made = profile_default()
    StageRoute.objects.create(stage="judge", profile=made)
    settings.OPENAI_BASE_URL, settings.SIMIA_MODEL = "http://this-worker:8000/v1", "llama-70b"
    profile_cache_clear()
    here = ("http://this-worker:8000/v1", "llama-70b")
    assert (profile_for_stage("agent", made.pk).base_url, profile_for_stage("agent", made.pk).model) == here
    assert (profile_for_stage("judge").base_url, profile_for_stage("judge").model) == here
    assert client_for_stage("agent", profile_id=made.pk).profile.base_url == here[0]


def test_rates_per_minute_are_set_on_the_profile_and_stay_with_it_when_renamed(client_for, stub):
    """Edited in the admin beside the concurrency, shown over REST, and read by the limiter from the row."""
    profile = stub.profile
    form = {
        "name": "renamed",
        "base_url": profile.base_url,
        "model": profile.model,
        "api_key_env": profile.api_key_env,
        "temperature": 0.7,
        "max_tokens": 2048,
        "stage_max_tokens": "{}",
        "timeout_seconds": 5,
        "max_concurrency": 4,
        "requests_per_minute": 500,
        "tokens_per_minute": 200000,
        "structured_mode": "auto",
        "tool_mode": "auto",
        "is_default": "on",
    }
    admin = client_for("admin")
    answer = admin.post(f"/admin/llm/endpointprofile/{profile.pk}/change/", form)
    assert answer.status_code == 302, answer.content.decode()[:2000]
    shown = admin.get(f"/api/v1/llm/profiles/{profile.pk}/").json()
    assert (shown["name"], shown["requests_per_minute"], shown["tokens_per_minute"]) == ("renamed", 500, 200000)
    limits = endpoint_limiter(EndpointProfile.objects.get(pk=profile.pk)).limits
    assert (limits.concurrency, limits.requests_per_minute, limits.tokens_per_minute) == (4, 500, 200000)
    refused = admin.post(f"/admin/llm/endpointprofile/{profile.pk}/change/", {**form, "requests_per_minute": 0})
    assert refused.status_code == 200 and "requests_per_minute" in refused.context["adminform"].form.errors
    assert EndpointProfile.objects.get(pk=profile.pk).requests_per_minute == 500


@pytest.mark.django_db(transaction=True)
def test_rates_configured_by_profile_name_in_the_environment_move_onto_the_profiles(monkeypatch):
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    before, after = [("llm", "0006_profile_tokens_per_second")], [("llm", "0007_profile_rate_limits")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps.get_model("llm", "EndpointProfile")
        for name in ("openai", "local", "odd"):
            old.objects.create(name=name, model="m")
        monkeypatch.setenv(
            "SIMIA_LLM_RATE_LIMITS",
            '{"openai": {"requests_per_minute": 500, "tokens_per_minute": 200000}, "local": {"requests_per_minute": 0},'
            ' "odd": {"tokens_per_minute": "many"}, "gone": {"requests_per_minute": 5}}',
        )
        executor = MigrationExecutor(connection)
        executor.migrate(after)
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
    rates = EndpointProfile.objects.order_by("name").values_list("name", "requests_per_minute", "tokens_per_minute")
    assert list(rates) == [("local", None, None), ("odd", None, None), ("openai", 500, 200000)]
