"""Fidelity runs per workspace: queued for a domain of the job's workspace, listed per workspace; another workspace's
run is not found."""

import pytest
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.test import APIClient

from simia_web.accounts.services import user_create, user_token, workspace_create
from simia_web.catalog.models import Domain, DomainReference
from simia_web.core.errors import ValidationFailed
from simia_web.fidelity.job_kinds import FidelityForm
from simia_web.fidelity.models import FidelityRun
from simia_web.jobs.services import job_queue
from tests.conftest import PASSWORD


@pytest.fixture
def run_of_a(db):
    """Team A's (the `default` workspace's) domain with a reference and a finished run."""
    domain = Domain.objects.create(name="store")
    DomainReference.objects.create(domain=domain, url="http://127.0.0.1:9/mcp")
    return FidelityRun.objects.create(domain=domain, reference={"url": "http://127.0.0.1:9/mcp"}, method="structural")


@pytest.fixture
def team_b(db):
    workspace = workspace_create(slug="team-b", name="Team B")
    user = user_create(username="curator-b", role="curator", password=PASSWORD, workspaces=["team-b"])
    return workspace, user


def test_another_workspaces_runs_are_not_found(run_of_a, team_b, client_for):
    workspace, user = team_b
    page = Client()
    page.force_login(user)
    assert "store" not in page.get("/fidelity/").content.decode()
    assert "store" not in page.get("/fidelity/?domain=store").content.decode()
    assert page.get(f"/fidelity/{run_of_a.pk}/").status_code == 404
    rest = APIClient()
    rest.credentials(HTTP_AUTHORIZATION=f"Token {user_token(user=user)}")
    assert rest.get("/api/v1/fidelity/runs/").json()["results"] == []
    assert rest.get("/api/v1/fidelity/runs/", {"domain": "store"}).json()["results"] == []
    for suffix in ("", "trajectories/", "calls/"):
        assert rest.get(f"/api/v1/fidelity/runs/{run_of_a.pk}/{suffix}").status_code == 404
    # Its own workspace's members see it.
    assert b"store" in client_for("annotator").get("/fidelity/").content
    assert client_for("annotator").get(f"/fidelity/{run_of_a.pk}/").status_code == 200


def test_a_run_is_queued_only_for_a_domain_of_the_workspace(run_of_a, team_b):
    workspace, _ = team_b
    with pytest.raises(ValidationFailed) as refused:
        job_queue(kind="fidelity", params={"domain": "store"}, workspace=workspace)
    assert refused.value.errors == {"domain": ["no domain named 'store'"]}
    with pytest.raises(CommandError, match="no domain named 'store'"):
        call_command("fidelity", "--domain", "store", "--workspace", "team-b")
    assert FidelityRun.objects.count() == 1
    assert [name for name, _ in FidelityForm(workspace=workspace).fields["domain"].choices if name] == []
    assert [name for name, _ in FidelityForm().fields["domain"].choices if name] == ["store"]
