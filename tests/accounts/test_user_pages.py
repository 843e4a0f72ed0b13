"""The Users page (admins): create with a password or an invitation link, change a role, deactivate, reset a
password; every refusal is the form again with what to do; annotators and curators get 403."""

import pytest

from simia_web.accounts.models import Role, User
from simia_web.core.models import AuditEvent
from tests.conftest import PASSWORD

NEW_PASSWORD = "plum-lantern-river-42"


@pytest.mark.parametrize("role", ["annotator", "curator"])
def test_only_admins_manage_users(client_for, users, role):
    client = client_for(role)
    person = users["annotator"]
    assert client.get("/users/").status_code == 403
    assert client.get("/users/new/").status_code == 403
    assert client.post("/users/new/", {"username": "x", "role": "admin", "how": "invite"}).status_code == 403
    assert client.post(f"/users/{person.pk}/", {"user-role": "admin"}).status_code == 403
    assert client.post(f"/users/{person.pk}/password/", {"link": "1"}).status_code == 403
    assert not User.objects.filter(username="x").exists()


def test_create_with_a_password_and_log_in(client_for, client):
    admin = client_for("admin")
    data = {"username": "ana", "role": "curator", "how": "password", "password1": NEW_PASSWORD}
    response = admin.post("/users/new/", {**data, "password2": NEW_PASSWORD})
    assert response.status_code == 302
    ana = User.objects.get(username="ana")
    assert ana.role == Role.CURATOR and ana.check_password(NEW_PASSWORD)
    assert b"ana" in admin.get("/users/").content


def test_an_invitation_link_sets_the_password(client_for):
    from django.test import Client

    admin = client_for("admin")
    page = admin.post("/users/new/", {"username": "bo", "role": "annotator", "how": "invite", "email": "bo@x.org"})
    assert page.status_code == 200
    link = page.context["link"]
    bo = User.objects.get(username="bo")
    assert not bo.has_usable_password()
    visitor = Client()
    form = visitor.get(link, follow=True)
    assert b"Choose a password" in form.content
    done = visitor.post(
        form.redirect_chain[-1][0], {"new_password1": NEW_PASSWORD, "new_password2": NEW_PASSWORD}, follow=True
    )
    assert b"Password set" in done.content
    bo.refresh_from_db()
    assert bo.check_password(NEW_PASSWORD)
    assert b"too old" in visitor.get(link, follow=True).content  # once only
    assert AuditEvent.objects.filter(action="user.invite").exists()


@pytest.mark.parametrize(
    "data,field,message",
    [
        ({"username": ""}, "username", "This field is required"),
        ({"username": "admin"}, "username", "exists already"),
        ({"username": "has space"}, "username", "Use only letters"),
        ({"how": "password"}, "password1", "Enter the password"),
        ({"how": "password", "password1": NEW_PASSWORD, "password2": "other"}, "password2", "differ"),
        ({"how": "password", "password1": "short", "password2": "short"}, "password1", "too short"),
        ({"role": "owner"}, "role", "Select a valid choice"),
    ],
)
def test_a_refused_user_is_the_form_again(client_for, data, field, message):
    response = client_for("admin").post("/users/new/", {"username": "cy", "role": "annotator", "how": "invite", **data})
    assert response.status_code == 400
    page = response.content.decode()
    assert f'id="field-{field}"' in page and message in page
    assert not User.objects.filter(username__in=["cy", "has space"]).exists()


def test_role_deactivate_and_password_reset(client_for, users, client):
    admin = client_for("admin")
    person = users["annotator"]
    saved = admin.post(f"/users/{person.pk}/", {"user-role": "curator", "user-email": "", "user-is_active": "on"})
    assert saved.status_code == 302
    person.refresh_from_db()
    assert person.role == Role.CURATOR
    admin.post(f"/users/{person.pk}/", {"user-role": "curator", "user-email": ""})  # unticked: deactivated
    person.refresh_from_db()
    assert not person.is_active
    reset = {"password-password1": NEW_PASSWORD, "password-password2": NEW_PASSWORD}
    assert admin.post(f"/users/{person.pk}/password/", reset).status_code == 302
    person.refresh_from_db()
    assert person.check_password(NEW_PASSWORD) and not person.check_password(PASSWORD)
    weak = admin.post(f"/users/{person.pk}/password/", {"password-password1": "123", "password-password2": "123"})
    assert weak.status_code == 400 and b"too short" in weak.content
    link = admin.post(f"/users/{person.pk}/password/", {"link": "1"})
    assert link.status_code == 200 and "/accounts/reset/" in link.context["link"]


def test_the_last_admin_stays(client_for, users):
    admin = client_for("admin")
    me = users["admin"]
    demoted = admin.post(f"/users/{me.pk}/", {"user-role": "annotator", "user-is_active": "on"})
    assert demoted.status_code == 400 and b"only active admin" in demoted.content
    gone = admin.post(f"/users/{me.pk}/", {"user-role": "admin"})
    assert gone.status_code == 400 and b"cannot deactivate yourself" in gone.content
    me.refresh_from_db()
    assert me.role == Role.ADMIN and me.is_active


def test_the_users_page_is_the_admins_workspace(client_for, users):
    from simia_web.accounts.models import Membership
    from simia_web.accounts.services import membership_set, user_create, workspace_create

    other = workspace_create(slug="lab")
    stranger = user_create(username="stranger", role="annotator", password=PASSWORD, workspaces=["lab"])
    admin = client_for("curator")
    admin.force_login(user_create(username="team-admin", role="admin", password=PASSWORD))  # not a site admin
    listed = admin.get("/users/").content.decode()
    assert "annotator" in listed and "stranger" not in listed
    assert admin.get(f"/users/{stranger.pk}/").status_code == 404
    assert admin.post(f"/users/{stranger.pk}/password/", {"link": "1"}).status_code == 404
    # A role set here is the role in this workspace; another workspace's role stays.
    person = users["annotator"]
    membership_set(workspace=other, user=person, role="annotator")
    admin.post(f"/users/{person.pk}/", {"user-role": "curator", "user-is_active": "on"})
    roles = dict(Membership.objects.filter(user=person).values_list("workspace__slug", "role"))
    assert roles == {"default": "curator", "lab": "annotator"}
    made = admin.post("/users/new/", {"username": "newbie", "role": "annotator", "how": "invite"})
    assert made.status_code == 200
    assert list(Membership.objects.filter(user__username="newbie").values_list("workspace__slug", flat=True)) == [
        "default"
    ]
