"""A role is one fact: the role in the current workspace decides every check, and a demotion takes effect on the
demoted user's next request; Django's staff and superuser flags follow the site administrator flag on every write,
whatever writes it."""

import io

import pytest
from django.core.management import call_command
from rest_framework.test import APIClient

from simia_web.accounts.models import Role, User
from simia_web.accounts.services import user_create, user_token
from simia_web.core.models import AuditEvent
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def _admin_powers(client) -> dict[str, int]:
    """What an admin can do and an annotator cannot, as status codes of the next requests."""
    return {
        "profiles": client.get("/api/v1/llm/profiles/").status_code,
        "queue job": client.post("/api/v1/jobs/", {"kind": "amplify"}, format="json").status_code,
        "queue page": client.get("/queue/synthesis/").status_code,
        "admin site": client.get("/admin/").status_code,
    }


# 400: no seeds to amplify. A workspace admin is not a site administrator: the admin site shows every workspace.
ADMIN = {"profiles": 200, "queue job": 400, "queue page": 200, "admin site": 302}
ANNOTATOR = {"profiles": 403, "queue job": 403, "queue page": 403, "admin site": 302}


@pytest.fixture
def admin_session():
    """A signed-in (workspace) admin with a browser session and an API token, as before a demotion."""
    user = user_create(username="ada", role=Role.ADMIN, password=PASSWORD)
    session, token = APIClient(), APIClient()
    session.force_login(user)
    token.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=user)}")
    assert not user.is_staff and not user.is_superuser
    assert _admin_powers(session) == ADMIN and _admin_powers(token)["profiles"] == 200
    return user, session, token


def _demoted(user: User, session, token) -> None:
    user.refresh_from_db()
    assert (user.role, user.is_staff, user.is_superuser) == (Role.ANNOTATOR, False, False)
    assert _admin_powers(session) == ANNOTATOR
    api_powers = {name: code for name, code in _admin_powers(token).items() if name in ("profiles", "queue job")}
    assert api_powers == {"profiles": 403, "queue job": 403}  # the token is checked against the role again


def test_a_demotion_in_the_admin_takes_effect_on_the_next_request(admin_session, users):
    user, session, token = admin_session
    other_admin = APIClient()
    other_admin.force_login(users["admin"])
    form = other_admin.get(f"/admin/accounts/user/{user.pk}/change/").context["adminform"].form
    data = {name: value for name, value in form.initial.items() if value is not None and name != "password"}
    data.update(
        role=Role.ANNOTATOR,
        is_active="on",
        date_joined_0=user.date_joined.strftime("%Y-%m-%d"),
        date_joined_1=user.date_joined.strftime("%H:%M:%S"),
    )
    data.pop("date_joined", None)
    data.pop("last_login", None)
    response = other_admin.post(f"/admin/accounts/user/{user.pk}/change/", data)
    assert response.status_code == 302, response.context["adminform"].form.errors

    _demoted(user, session, token)
    event = AuditEvent.objects.get(action="user.role", target_id=str(user.pk))
    assert event.data == {"from": "admin", "to": "annotator"} and event.actor == users["admin"]


def test_a_demotion_by_command_or_service_or_bulk_update_takes_effect_too(admin_session):
    from simia_web.accounts.services import user_role_set

    user, session, token = admin_session
    out = io.StringIO()
    call_command("set_role", "ada", "annotator", stdout=out)
    assert "ada: admin -> annotator." in out.getvalue()
    _demoted(user, session, token)

    user_role_set(user=user, role=Role.ADMIN)
    assert user.memberships.get().role == Role.ADMIN and _admin_powers(session) == ADMIN
    User.objects.filter(pk=user.pk).update(role=Role.CURATOR)  # even a write that skips save()
    user.refresh_from_db()
    assert user.role == Role.CURATOR and not user.is_staff
    assert _admin_powers(session)["admin site"] == 302 and _admin_powers(session)["profiles"] == 403


def test_the_flags_cannot_be_set_apart_from_the_site_administrator_flag():
    from simia_web.accounts.services import user_role_set, user_site_admin_set

    for role in Role.values:
        user = user_create(username=f"u-{role}", role=role, password=PASSWORD)
        assert not user.is_staff and not user.is_superuser
    site = user_create(username="site", role=Role.CURATOR, password=PASSWORD, site_admin=True)
    assert site.is_staff and site.is_superuser and site.has_role(Role.ADMIN)
    user_site_admin_set(user=site, site_admin=False)
    assert not site.is_staff and not site.is_superuser and not site.has_role(Role.ADMIN)
    sneaky = User.objects.create_user("sneaky", password=PASSWORD, is_staff=True, is_superuser=True)
    sneaky.refresh_from_db()
    assert sneaky.role == Role.ANNOTATOR and not sneaky.is_staff and not sneaky.is_superuser
    assert not sneaky.has_role(Role.CURATOR)
    root = User.objects.create_superuser("root", "root@example.com", PASSWORD)  # what createsuperuser calls
    assert root.role == Role.ADMIN and root.is_site_admin and root.is_staff and root.is_superuser
    with pytest.raises(ValueError, match="admin role"):
        User.objects.create_superuser("odd", "odd@example.com", PASSWORD, role=Role.CURATOR)
    with pytest.raises(ValueError, match="Unknown role"):
        user_role_set(user=root, role="owner")
