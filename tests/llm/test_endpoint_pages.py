"""The LLM endpoints page (admins): profiles listed as they will be used, created and edited with a key stored
encrypted and never sent back, tested with the capability probe, and the stage routes."""

import pytest
from django.test import override_settings

from simia_web.core.models import AuditEvent
from simia_web.llm.endpoints import endpoint_client
from simia_web.llm.keys import api_key_decrypt, profile_api_key
from simia_web.llm.models import EndpointProfile, StageRoute
from simia_web.llm.selectors import endpoint_connected, profile_for_stage

SECRET = "sk-test-0123456789abcdef"


def _form(**overrides):
    data = {
        "name": "local",
        "base_url": "http://127.0.0.1:9/v1",
        "model": "tiny",
        "key_source": "stored",
        "api_key": SECRET,
        "api_key_env": "",
        "is_default": "on",
        "max_concurrency": 4,
        "timeout_seconds": 30,
        "temperature": 0.7,
        "max_tokens": 1024,
        "structured_mode": "auto",
        "tool_mode": "auto",
        "chars_per_token": 2.5,
    }
    data.update(overrides)
    return {k: v for k, v in data.items() if v is not None}


def test_only_admins_open_the_endpoints_page(client_for):
    for role in ("annotator", "curator"):
        client = client_for(role)
        assert client.get("/llm/endpoints/").status_code == 403
        assert client.get("/llm/endpoints/new/").status_code == 403
        assert client.post("/llm/endpoints/new/", _form()).status_code == 403
    assert not EndpointProfile.objects.exists()
    page = client_for("admin").get("/llm/endpoints/")
    assert page.status_code == 200
    assert b"No endpoint yet" in page.content


def test_a_key_is_stored_encrypted_and_never_sent_back(client_for):
    client = client_for("admin")
    response = client.post("/llm/endpoints/new/", _form())
    assert response.status_code == 302, response.content.decode()[:2000]
    profile = EndpointProfile.objects.get(name="local")
    assert SECRET not in profile.api_key_encrypted
    assert api_key_decrypt(profile.api_key_encrypted) == SECRET
    assert profile_api_key(profile) == SECRET
    assert profile.is_default
    for url in ("/llm/endpoints/", f"/llm/endpoints/{profile.pk}/"):
        page = client.get(url).content.decode()
        assert SECRET not in page
        assert "…cdef" in page  # masked: its last four characters
    # Saved again with the key left empty: the stored key stays.
    assert client.post(f"/llm/endpoints/{profile.pk}/", _form(api_key="", model="tiny-2")).status_code == 302
    profile.refresh_from_db()
    assert (profile.model, api_key_decrypt(profile.api_key_encrypted)) == ("tiny-2", SECRET)
    # The client sends it.
    openai_client, _url = endpoint_client(profile)
    assert openai_client.api_key == SECRET
    # An environment variable instead: the stored key is removed.
    changed = _form(key_source="env", api_key="", api_key_env="LOCAL_API_KEY")
    assert client.post(f"/llm/endpoints/{profile.pk}/", changed).status_code == 302
    profile.refresh_from_db()
    assert (profile.api_key_encrypted, profile.api_key_env) == ("", "LOCAL_API_KEY")
    assert AuditEvent.objects.filter(action__startswith="llm.profile").count() == 3


def test_a_key_under_another_secret_cannot_be_read(client_for):
    client = client_for("admin")
    client.post("/llm/endpoints/new/", _form())
    profile = EndpointProfile.objects.get(name="local")
    with override_settings(SIMIA_SECRET_KEY_ENCRYPTION="another secret"):
        assert api_key_decrypt(profile.api_key_encrypted) is None
        assert profile_api_key(profile) == ""
        page = client.get(f"/llm/endpoints/{profile.pk}/").content.decode()
        assert "enter it again" in page
        refused = client.post(f"/llm/endpoints/{profile.pk}/", _form(api_key=""))
        assert refused.status_code == 400
        assert "cannot be read any more" in refused.content.decode()


@pytest.mark.parametrize(
    "change,field,message",
    [
        ({"name": ""}, "name", "This field is required"),
        ({"model": ""}, "model", "Name the model"),
        ({"api_key": ""}, "api_key", "Enter the key to store"),
        ({"base_url": "http://user:pw@127.0.0.1:9/v1"}, "base_url", "must not contain credentials"),
        ({"base_url": "http://169.254.169.254/v1"}, "base_url", "link-local"),
        ({"key_source": "env", "api_key_env": "SECRET_KEY"}, "api_key_env", "_API_KEY"),
        ({"temperature": 5}, "temperature", "between 0 and 2"),
        ({"max_concurrency": 0}, "max_concurrency", "at least 1"),
        ({"stage_max_tokens": '{"nope": 3}'}, "stage_max_tokens", "no stage named nope"),
    ],
)
def test_a_refused_profile_is_the_form_again_with_the_reason(client_for, change, field, message):
    response = client_for("admin").post("/llm/endpoints/new/", _form(**change))
    assert response.status_code == 400
    page = response.content.decode()
    assert f'id="field-{field}"' in page
    assert message in page
    assert "<form" in page and 'class="topbar"' in page  # the page itself, not a bare error
    assert not EndpointProfile.objects.exists()


def test_following_the_environment_shows_what_is_used(client_for, settings):
    settings.OPENAI_BASE_URL, settings.SIMIA_MODEL = "http://127.0.0.1:7/v1", "env-model"
    client = client_for("admin")
    client.post("/llm/endpoints/new/", _form(key_source="env", api_key="", api_key_env="OPENAI_API_KEY"))
    profile = EndpointProfile.objects.get(name="local")
    # Ticked again: the list shows the environment's URL and model, not those typed before.
    assert client.post(f"/llm/endpoints/{profile.pk}/", _form(follows_environment="on", api_key="")).status_code == 302
    page = client.get("/llm/endpoints/").content.decode()
    assert "http://127.0.0.1:7/v1" in page and "env-model" in page
    assert "http://127.0.0.1:9/v1" not in page
    profile.refresh_from_db()
    assert (profile.base_url, profile.model) == ("http://127.0.0.1:7/v1", "env-model")


def test_test_runs_the_probe_and_shows_its_table(client_for, llm_stub, eager):
    client = client_for("admin")
    assert not endpoint_connected()
    response = client.post(f"/llm/endpoints/{llm_stub.profile.pk}/test/", follow=True)
    page = response.content.decode()
    assert "Connected." in page
    assert 'id="probe-table"' in page and "json_schema" in page
    assert endpoint_connected()
    probe = client.get(f"/llm/endpoints/{llm_stub.profile.pk}/probe/?since=2000-01-01T00:00:00%2B00:00")
    assert probe.status_code == 286 and b"Connected." in probe.content


def test_an_unreachable_endpoint_is_said_so(client_for, eager):
    from tests.support.llm_stub import closed_port_url

    profile = EndpointProfile.objects.create(name="gone", base_url=closed_port_url(), model="m", timeout_seconds=2)
    page = client_for("admin").post(f"/llm/endpoints/{profile.pk}/test/", follow=True).content.decode()
    assert "No answer." in page and "unreachable" in page
    assert not endpoint_connected()


def test_stage_routes_are_set_on_the_page(client_for):
    a = EndpointProfile.objects.create(name="a", model="m", is_default=True)
    b = EndpointProfile.objects.create(name="b", model="n")
    client = client_for("admin")
    response = client.post("/llm/endpoints/", {"judge": str(b.pk), "agent": ""})
    assert response.status_code == 302
    assert dict(StageRoute.objects.values_list("stage", "profile_id")) == {"judge": b.pk}
    assert profile_for_stage("judge").pk == b.pk and profile_for_stage("agent").pk == a.pk
    page = client.get("/llm/endpoints/").content.decode()
    assert "Judge" in page
    client.post("/llm/endpoints/", {"judge": ""})
    assert not StageRoute.objects.exists()
    refused = client.post("/llm/endpoints/", {"judge": "999999"})
    assert refused.status_code == 400 and "Select a valid choice" in refused.content.decode()


def test_a_profile_page_shows_the_requests_it_is_given_at_once(client_for):
    from simia_web.llm.models import EndpointProfile

    profile = EndpointProfile.objects.create(
        name="local", base_url="http://127.0.0.1:9/v1", model="m", max_concurrency=8
    )
    page = client_for("admin").get(f"/llm/endpoints/{profile.pk}/").content.decode()
    panel = page[page.index('id="adaptive-limit"') :]
    assert "of at most 8 in flight allowed now" in panel or "at most 8 at once" in panel
