"""The audit log: sign-ins (successful and refused) and membership changes, read on /audit-log/ and
GET /api/v1/audit-log/, filtered and cursor-paged; what a workspace admin sees; the retention purge."""

from datetime import timedelta

import pytest
from django.core.cache import cache
from django.utils import timezone
from rest_framework.test import APIClient

from simia_web.accounts.models import Role, Workspace
from simia_web.accounts.services import membership_set, user_create, user_role_set, workspace_create
from simia_web.auditlog.receivers import LAST_PURGE_KEY
from simia_web.core.models import AuditEvent
from simia_web.jobs.models import Job
from simia_web.jobs.signals import watchdog_looked
from tests.conftest import PASSWORD

pytestmark = pytest.mark.django_db


def test_sign_ins_are_logged_and_the_page_shows_who_did_what(client, users):
    assert client.post("/accounts/login/", {"username": "curator", "password": "wrong"}).status_code == 200
    assert client.post("/accounts/login/", {"username": "admin", "password": PASSWORD}).status_code == 302
    refused = AuditEvent.objects.get(action="sign_in.refused")
    assert refused.data["username"] == "curator" and refused.data["reason"] == "bad_credentials"
    assert AuditEvent.objects.filter(action="sign_in", actor=users["admin"]).exists()
    user_role_set(user=users["annotator"], role=Role.CURATOR, actor=users["admin"])

    page = client.get("/audit-log/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "sign_in.refused" in text and "user.role" in text and "annotator</del> → <ins>curator" in text
    filtered = client.get("/audit-log/", {"action": "sign_in.", "actor": ""}).content.decode()
    assert "sign_in.refused" in filtered and "user.role" not in filtered
    assert client.get("/audit-log/", {"since": "not a date"}).status_code == 400


def test_the_api_filters_and_pages_with_a_cursor(client, users):
    api = APIClient()
    api.force_login(users["admin"])
    for i in range(7):
        user_role_set(user=users["annotator"], role=Role.CURATOR if i % 2 else Role.ANNOTATOR, actor=users["admin"])
    first = api.get("/api/v1/audit-log/", {"action": "user.role", "page_size": 3}).json()
    assert len(first["results"]) == 3 and first["next"]
    assert first["results"][0]["actor"] == "admin" and first["results"][0]["changes"][0][0] == "value"
    second = api.get(first["next"]).json()
    ids = [e["id"] for e in first["results"]] + [e["id"] for e in second["results"]]
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == 6
    by_object = api.get(
        "/api/v1/audit-log/", {"target_type": "accounts.user", "target_id": users["annotator"].pk}
    ).json()["results"]
    assert by_object and all(e["target_id"] == str(users["annotator"].pk) for e in by_object)
    later = (timezone.now() + timedelta(hours=1)).isoformat()
    assert api.get("/api/v1/audit-log/", {"since": later}).json()["results"] == []
    # ISO 8601 allows offsets PostgreSQL does not (beyond ±15:59): the instant is compared in UTC all the same.
    far_offset = api.get("/api/v1/audit-log/", {"until": "0591-02-15T03:30:41.994+19:18"})
    assert far_offset.status_code == 200 and far_offset.json()["results"] == []
    client.force_login(users["admin"])
    assert client.get("/audit-log/", {"since": "2026-01-01T00:00:00+19:18"}).status_code == 200
    curator = APIClient()
    curator.force_login(users["curator"])
    assert curator.get("/api/v1/audit-log/").status_code == 403


def test_a_workspace_admin_reads_only_their_workspaces_events(users):
    research = workspace_create(slug="research", name="Research", actor=users["admin"])
    lead = user_create(username="lead", role=Role.ANNOTATOR, password=PASSWORD, workspaces=["research"])
    membership_set(workspace=research, user=lead, role=Role.ADMIN, actor=users["admin"])
    membership_set(workspace=Workspace.objects.get(slug="default"), user=users["curator"], role=Role.ADMIN)
    api = APIClient()
    api.force_login(lead)
    slugs = {e["workspace"] for e in api.get("/api/v1/audit-log/", {"page_size": 500}).json()["results"]}
    assert slugs == {"research"}


def test_the_purge_runs_on_the_watchdog_beat_at_most_once_an_hour(settings, users):
    settings.SIMIA_AUDIT_RETENTION_DAYS = 30
    cache.delete(LAST_PURGE_KEY)
    old = AuditEvent.objects.create(action="x.old", target_type="t", target_id="1")
    AuditEvent.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    watchdog_looked.send(sender=Job, now=timezone.now())
    assert not AuditEvent.objects.filter(pk=old.pk).exists()
    again = AuditEvent.objects.create(action="x.old", target_type="t", target_id="2")
    AuditEvent.objects.filter(pk=again.pk).update(created_at=timezone.now() - timedelta(days=31))
    watchdog_looked.send(sender=Job, now=timezone.now())  # within the hour: not again
    assert AuditEvent.objects.filter(pk=again.pk).exists()


def test_events_about_a_workspaces_data_belong_to_that_workspace(users):
    """A decision, an edit or a bulk write is logged in the workspace that owns its object, so another workspace's
    admins never read its reasons."""
    from simia_web.curation.models import Trajectory
    from simia_web.curation.services import review_decide, reviews_bulk
    from tests.support.factories import make_trajectory

    research = workspace_create(slug="research", name="Research", actor=users["admin"])
    lead = user_create(username="lead", role=Role.ADMIN, password=PASSWORD, workspaces=["research"])
    theirs = make_trajectory("secret-shop")
    review_decide(trajectory=theirs, reviewer=users["curator"], decision="reject", expected_version=1, reason="leak")
    other = make_trajectory("secret-shop")
    reviews_bulk(trajectories=Trajectory.objects.filter(pk=other.pk), reviewer=users["curator"], decision="accept")
    logged = AuditEvent.objects.filter(target_type="curation.trajectory")
    assert logged.count() >= 2 and set(logged.values_list("workspace__slug", flat=True)) == {"default"}
    api = APIClient()
    api.force_login(lead)
    seen = api.get("/api/v1/audit-log/", {"page_size": 500}).json()["results"]
    assert research and not [e for e in seen if e["target_type"] == "curation.trajectory"]
