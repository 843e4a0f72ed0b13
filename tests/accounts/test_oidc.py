"""Single sign-on against a real OpenID provider (oidc-provider-mock, started on a thread): the redirect flow,
users created on first sign-in, memberships from the role map (granted and revoked), and each refusal, which
creates no user and writes a log line and an audit event."""

import json
import logging
import time
from urllib.parse import parse_qs, urlsplit

import pytest
import requests
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from oidc_provider_mock import run_server_in_thread

from simia_web.accounts.models import Membership, Role, User
from simia_web.accounts.oidc import oidc_client
from simia_web.accounts.services import user_create, user_token, workspace_create
from simia_web.core.models import AuditEvent
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db

ROLE_MAP = {"annotators": ["default:annotator"], "ml-team": ["research:curator"], "ops": ["*:admin"]}


@pytest.fixture(scope="module")
def provider():
    with run_server_in_thread(require_nonce=True) as server:
        yield f"http://localhost:{server.server_port}"


@pytest.fixture
def oidc(settings, provider):
    settings.SIMIA_OIDC_ISSUER = provider
    settings.SIMIA_OIDC_CLIENT_ID = "simia"
    settings.SIMIA_OIDC_CLIENT_SECRET = "s3cret"
    settings.SIMIA_OIDC_ROLE_MAP = json.dumps(ROLE_MAP)
    workspace_create(slug="research", name="Research")
    return provider


def provider_user(provider: str, sub: str, **claims):
    requests.put(f"{provider}/users/{sub}", json={"sub": sub, **claims}, timeout=5).raise_for_status()


def sign_in(client, sub: str):
    """The browser's trip: our login → the provider's form (the person picks `sub`) → our callback."""
    start = client.get("/accounts/oidc/login/")
    assert start.status_code == 302
    answer = requests.post(start["Location"], data={"sub": sub}, allow_redirects=False, timeout=5)
    assert answer.status_code == 302, answer.text
    back = urlsplit(answer.headers["Location"])
    assert back.path == "/accounts/oidc/callback/"
    return client.get(f"{back.path}?{back.query}")


def test_the_login_page_shows_the_button_only_when_configured(client, settings, oidc):
    assert "Sign in with your company account" in client.get("/accounts/login/").content.decode()
    settings.SIMIA_OIDC_ISSUER = ""
    assert "Sign in with your company account" not in client.get("/accounts/login/").content.decode()
    assert client.get("/accounts/oidc/login/").status_code == 404


def test_first_sign_in_creates_the_user_with_mapped_roles_and_a_removed_group_revokes(client, oidc):
    provider_user(oidc, "u-1", preferred_username="alice", email="alice@example.com", groups=["annotators", "ml-team"])
    response = sign_in(client, "u-1")
    assert response.status_code == 302 and response["Location"] == "/"
    alice = User.objects.get(username="alice")
    assert (alice.oidc_issuer, alice.oidc_subject, alice.email) == (oidc, "u-1", "alice@example.com")
    roles = dict(Membership.objects.filter(user=alice).values_list("workspace__slug", "role"))
    assert roles == {"default": Role.ANNOTATOR, "research": Role.CURATOR}
    assert not alice.is_site_admin and alice.has_role(Role.ANNOTATOR)
    assert client.get("/api/v1/me/").json()["username"] == "alice"
    assert AuditEvent.objects.filter(action="sign_in", actor=alice, data__method="oidc").exists()
    assert AuditEvent.objects.filter(action="membership.grant", target_id=str(alice.pk)).count() == 2

    client.logout()
    provider_user(oidc, "u-1", preferred_username="alice", groups=["ml-team"])  # out of "annotators"
    assert sign_in(client, "u-1").status_code == 302
    roles = dict(Membership.objects.filter(user=alice).values_list("workspace__slug", "role"))
    assert roles == {"research": Role.CURATOR}
    alice.refresh_from_db()
    assert alice.current_workspace.slug == "research" and alice.role == Role.CURATOR
    revoked = AuditEvent.objects.get(action="membership.revoke", target_id=str(alice.pk))
    assert revoked.data["workspace"] == "default" and revoked.data["from"] == Role.ANNOTATOR
    assert User.objects.filter(username="alice").count() == 1


def test_the_site_administrator_group(client, oidc):
    provider_user(oidc, "u-ops", preferred_username="olga", groups=["ops"])
    assert sign_in(client, "u-ops").status_code == 302
    olga = User.objects.get(username="olga")
    assert olga.is_site_admin and olga.is_superuser and olga.has_role(Role.ADMIN)


def test_no_mapped_group_is_refused_with_a_page_that_says_why(client, oidc, caplog):
    provider_user(oidc, "u-2", preferred_username="bob", groups=["marketing"])
    with caplog.at_level(logging.WARNING, logger="simia_web.accounts"):
        response = sign_in(client, "u-2")
    assert response.status_code == 403
    assert "in no group that gives access" in response.content.decode() and "marketing" in response.content.decode()
    assert not User.objects.filter(username="bob").exists()
    assert "reason=no_mapped_group" in caplog.text
    assert AuditEvent.objects.get(action="sign_in.refused").data["reason"] == "no_mapped_group"


def test_a_user_who_lost_every_group_is_refused_and_loses_their_memberships(client, oidc):
    provider_user(oidc, "u-3", preferred_username="carol", groups=["annotators"])
    assert sign_in(client, "u-3").status_code == 302
    client.logout()
    provider_user(oidc, "u-3", preferred_username="carol", groups=[])
    assert sign_in(client, "u-3").status_code == 403
    carol = User.objects.get(username="carol")
    assert not Membership.objects.filter(user=carol).exists() and not carol.has_role(Role.ANNOTATOR)


def test_password_login_off_except_for_site_administrators(client, settings, oidc, users):
    settings.SIMIA_PASSWORD_LOGIN = False
    response = client.post("/accounts/login/", {"username": "curator", "password": PASSWORD})
    assert response.status_code == 200 and "Password login is turned off" in response.content.decode()
    assert "_auth_user_id" not in client.session
    response = client.post("/accounts/login/", {"username": "admin", "password": PASSWORD})
    assert response.status_code == 302  # a site administrator
    token = user_token(user=users["curator"])  # API tokens keep working
    assert client.get("/api/v1/me/", HTTP_AUTHORIZATION=f"Token {token}").status_code == 200


# -- refusals the provider cannot be made to commit: the callback forged, with the client's public methods --------

ISSUER = "https://idp.example.com"


@pytest.fixture
def forged(settings, monkeypatch):
    """A provider whose token endpoint answers what the test forges, signed with `key`."""
    settings.SIMIA_OIDC_ISSUER = ISSUER
    settings.SIMIA_OIDC_CLIENT_ID = "simia"
    settings.SIMIA_OIDC_CLIENT_SECRET = "s3cret"
    settings.SIMIA_OIDC_ROLE_MAP = json.dumps(ROLE_MAP)
    key = RSAKey.generate_key(2048, parameters={"kid": "good"})
    client = oidc_client()
    metadata = {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "jwks_uri": f"{ISSUER}/jwks",
        "id_token_signing_alg_values_supported": ["RS256"],
    }
    monkeypatch.setattr(client, "load_server_metadata", lambda: metadata)
    monkeypatch.setattr(client, "fetch_jwk_set", lambda force=False: KeySet([key]).as_dict())
    answer: dict = {}
    monkeypatch.setattr(client, "fetch_access_token", lambda *args, **kwargs: dict(answer))
    return key, answer


def _claims(nonce: str, **overrides) -> dict:
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": "simia", "sub": "x-1", "preferred_username": "mallory", "groups": ["annotators"]}
    return {**claims, "iat": now, "exp": now + 300, "nonce": nonce, **overrides}


def _start(client) -> tuple[str, str]:
    query = parse_qs(urlsplit(client.get("/accounts/oidc/login/")["Location"]).query)
    return query["state"][0], query["nonce"][0]


def _forge(key, claims: dict, kid: str = "good") -> str:
    return jwt.encode({"alg": "RS256", "kid": kid}, claims, key)


def test_a_forged_callback_with_a_valid_token_signs_in(client, forged):
    key, answer = forged
    state, nonce = _start(client)
    answer.update(access_token="a", token_type="Bearer", id_token=_forge(key, _claims(nonce)))
    assert client.get(f"/accounts/oidc/callback/?code=c&state={state}").status_code == 302
    assert User.objects.filter(username="mallory").exists()


@pytest.mark.parametrize(
    "case,reason",
    [
        ("wrong state", "wrong_state"),
        ("wrong nonce", "wrong_nonce"),
        ("another issuer", "wrong_iss"),
        ("another audience", "wrong_aud"),
        ("expired", "expired_token"),
        ("unverifiable signature", "bad_signature"),
    ],
)
def test_each_refusal_creates_no_user_and_says_why(client, forged, caplog, case, reason):
    key, answer = forged
    state, nonce = _start(client)
    claims, signer = _claims(nonce), key
    if case == "wrong state":
        state = "not-the-state-we-sent"
    elif case == "wrong nonce":
        claims["nonce"] = "another-nonce"
    elif case == "another issuer":
        claims["iss"] = "https://evil.example.com"
    elif case == "another audience":
        claims["aud"] = "another-client"
    elif case == "expired":
        claims.update(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600)
    else:
        signer = RSAKey.generate_key(2048, parameters={"kid": "good"})  # same key id, another key
    answer.update(access_token="a", token_type="Bearer", id_token=_forge(signer, claims))
    with caplog.at_level(logging.WARNING, logger="simia_web.accounts"):
        response = client.get(f"/accounts/oidc/callback/?code=c&state={state}")
    assert response.status_code == 400, (case, response.status_code)
    assert "Sign-in refused" in response.content.decode()
    assert not User.objects.filter(username="mallory").exists()
    assert f"reason={reason}" in caplog.text, caplog.text
    assert AuditEvent.objects.get(action="sign_in.refused").data["reason"] == reason
    assert "_auth_user_id" not in client.session


def test_a_local_account_of_the_same_name_is_not_taken_over(client, forged):
    user_create(username="mallory", role=Role.ADMIN, password=PASSWORD)
    key, answer = forged
    state, nonce = _start(client)
    answer.update(access_token="a", token_type="Bearer", id_token=_forge(key, _claims(nonce)))
    response = client.get(f"/accounts/oidc/callback/?code=c&state={state}")
    assert response.status_code == 403 and "username_taken" in response.content.decode()
