"""Calibration in two workspaces side by side: ratings, agreement figures (and the figures kept for them), runs and
assignments are each one workspace's; a run queued in a workspace judges that workspace's rated items and belongs to
it; items go only to the workspace's members."""

import pytest

from simia_web.accounts.models import Workspace
from simia_web.accounts.services import user_create, workspace_create, workspace_switch
from simia_web.calibration.job_kinds import CalibrationKind
from simia_web.calibration.models import CalibrationRun, KeptFigures, RatingAssignment
from simia_web.calibration.selectors import inter_annotator_agreement, rated_items
from simia_web.calibration.services import assignments_create, calibration_job_create, rating_save
from simia_web.catalog.services import domain_ensure
from simia_web.core.errors import ValidationFailed
from simia_web.curation.services import trajectory_create
from simia_web.simulation.judge import CRITERIA, PROMPT_VERSION
from tests.conftest import PASSWORD
from tests.support.factories import TOOLS, conversation


def _item(domain):
    return trajectory_create(
        violations=[], kind="rollout", domain=domain, messages=conversation(f"Cancel W1 in {domain.name}."), tools=TOOLS
    )


def _rate(item, *people, score=0.8):
    for person in people:
        rating_save(trajectory_id=item.pk, annotator=person, text_version=1, scores=dict.fromkeys(CRITERIA, score))


class Two:
    """`default` has two shop items rated by two people; team B one bank item rated by one; `both` curates in both."""

    def __init__(self, users):
        self.a = Workspace.objects.get(slug="default")
        self.b = workspace_create(slug="team-b", name="Team B")
        self.both = user_create(username="both", role="curator", password=PASSWORD, workspaces=["default", "team-b"])
        self.b_rater = user_create(username="b-rater", role="annotator", password=PASSWORD, workspaces=["team-b"])
        shop, bank = domain_ensure(name="shop"), domain_ensure(name="bank", workspace_id=self.b.pk)
        self.a_items = [_item(shop), _item(shop)]
        self.b_item = _item(bank)
        for item in self.a_items:
            _rate(item, users["annotator"], users["curator"])
        _rate(self.b_item, self.b_rater, score=0.2)


@pytest.fixture
def two(users) -> Two:
    return Two(users)


def test_agreement_figures_are_each_workspaces_and_kept_apart(two):
    a = inter_annotator_agreement(workspace_ids=[two.a.pk])
    b = inter_annotator_agreement(workspace_ids=[two.b.pk])
    assert (a["items"], a["annotators"], a["overlapping_items"]) == (2, 2, 2)
    assert (b["items"], b["annotators"], b["overlapping_items"]) == (1, 1, 0)
    # Each workspace keeps its own figures: reading one does not drop, or answer with, the other's.
    assert KeptFigures.objects.filter(name__startswith="inter_annotator").count() == 2
    assert inter_annotator_agreement(workspace_ids=[two.a.pk]) == a
    assert inter_annotator_agreement(workspace_ids=[two.b.pk]) == b


def test_the_calibration_pages_show_the_current_workspaces_ratings_and_runs(client, two):
    run_a = CalibrationRun.objects.create(prompt_version=PROMPT_VERSION, profile_name="a", workspace=two.a)
    run_b = CalibrationRun.objects.create(prompt_version=PROMPT_VERSION, profile_name="b", workspace=two.b)
    client.force_login(two.both)
    page = client.get("/calibration/")
    assert list(page.context["runs"]) == [run_a] and page.context["iaa"]["items"] == 2
    assert client.get(f"/calibration/runs/{run_b.pk}/").status_code == 404
    assert client.get(f"/trajectories/{two.b_item.pk}/rating/").status_code == 404
    workspace_switch(user=two.both, workspace=two.b)
    page = client.get("/calibration/")
    assert list(page.context["runs"]) == [run_b] and page.context["iaa"]["items"] == 1
    assert client.get(f"/calibration/runs/{run_b.pk}/").status_code == 200
    assert client.get("/calibration/agreement/").context["iaa"]["items"] == 1


def test_a_calibration_run_belongs_to_the_workspace_it_is_queued_in_and_judges_its_items(two):
    job = calibration_job_create(prompt_version=PROMPT_VERSION, actor=two.both, workspace=two.b)
    run = CalibrationRun.objects.get(job=job)
    assert job.workspace_id == run.workspace_id == two.b.pk
    _, units = CalibrationKind().plan(job, None)
    assert [unit.params["trajectory"] for unit in units] == [two.b_item.pk]
    assert list(rated_items(workspace_ids=[two.a.pk])) == two.a_items


def test_items_go_only_to_the_workspaces_members_and_from_its_own_items(client, two, users):
    where = {"overlap": 1, "actor": two.both, "selection": {}, "workspace": two.b}
    with pytest.raises(ValidationFailed, match="not annotators in this workspace: annotator"):
        assignments_create(trajectory_ids=[two.b_item.pk], annotators=[users["annotator"]], **where)
    with pytest.raises(ValidationFailed, match="no trajectory with id"):
        assignments_create(trajectory_ids=[two.a_items[0].pk], annotators=[two.b_rater], **where)
    made = assignments_create(trajectory_ids=[two.b_item.pk], annotators=[two.b_rater], **where)
    assert RatingAssignment.objects.get(batch=made["batch"]).batch.workspace_id == two.b.pk

    client.force_login(two.both)  # working in `default`
    form = client.get("/calibration/assignments/").context["form"]
    assert "b-rater" not in [p.username for p in form.fields["annotators"].queryset]
    assert not client.get("/calibration/assignments/").context["batches"]
    refused = client.post(
        "/calibration/assignments/", {"ids": str(two.b_item.pk), "overlap": 1, "limit": 10, "annotators": ["both"]}
    )
    assert refused.status_code == 200 and "no item matches" in refused.content.decode()


def test_the_rest_api_reads_and_writes_calibration_in_the_callers_workspaces(client, two, users):
    client.force_login(two.b_rater)
    ratings = client.get("/api/v1/ratings/").json()["results"]
    assert [r["trajectory"] for r in ratings] == [two.b_item.pk]
    rating = {"trajectory": two.a_items[0].pk, "text_version": 1, "scores": {"task_completed": 0.5}}
    assert client.post("/api/v1/ratings/", rating, content_type="application/json").status_code == 400

    client.force_login(two.both)
    assert len(client.get("/api/v1/ratings/").json()["results"]) == 5
    assert len(client.get("/api/v1/ratings/", {"workspace": "team-b"}).json()["results"]) == 1
    assert client.get("/api/v1/calibration/runs/agreement/", {"workspace": "team-b"}).json()["items"] == 1
    hand_out = {"trajectories": [two.b_item.pk], "annotators": ["b-rater"], "overlap": 1}
    refused = client.post("/api/v1/rating-assignments/", hand_out, content_type="application/json")
    assert refused.status_code == 400 and "workspace" in refused.json()  # a member of two names one
    made = client.post(
        "/api/v1/rating-assignments/", {**hand_out, "workspace": "team-b"}, content_type="application/json"
    )
    assert made.status_code == 201 and made.json()["assignments"] == 1
    listed = client.get("/api/v1/rating-assignments/", {"workspace": "default"}).json()["results"]
    assert listed == []

    client.force_login(users["curator"])  # of `default` only: team B's assignments are not theirs to read
    assert client.get("/api/v1/rating-assignments/").json()["results"] == []
