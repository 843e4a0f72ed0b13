"""A job kind is one registration; its parameters (ranges and caps) are checked the same way by the API, the
commands and the queue pages, and a refused job writes nothing; progress is one query for any number of jobs."""

import pytest
from django import forms
from django.core.exceptions import ValidationError
from django.core.management import call_command
from django.core.management.base import CommandError
from rest_framework import serializers

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.core.models import AuditEvent
from simia_web.jobs import pipelines
from simia_web.jobs.forms import JobParametersForm
from simia_web.jobs.models import Job, JobStatus
from simia_web.jobs.parameters import CappedListField
from simia_web.jobs.pipelines import UnitPlan, pipeline_register
from simia_web.jobs.selectors import jobs_progress
from simia_web.jobs.services import job_create, job_queue

API = "/api/v1"

# ---- an example kind: all it takes is this module's three classes and the registration line in the fixture --


class EchoJobSerializer(serializers.Serializer):
    """`echo`: one unit per word, each writing the word back."""

    words = CappedListField(cap="SIMIA_MAX_UNITS_PER_JOB", child=serializers.CharField(max_length=40), min_length=1)

    def create(self, validated_data):
        return job_create(kind="echo", params={"words": validated_data["words"]}, actor=validated_data["actor"])


class EchoForm(JobParametersForm):
    kind = "echo"

    words = forms.CharField(help_text="Words separated by spaces.")

    def clean_words(self) -> list[str]:
        return self.cleaned_data["words"].split()


class EchoPipeline:
    kind = "echo"
    label = "Echo words"
    stages = ("echo",)
    parameters = EchoJobSerializer
    form = EchoForm

    def plan(self, job, stage):
        if stage is not None:
            return None
        return "echo", [UnitPlan("echo", f"echo:{i}", {"word": w}) for i, w in enumerate(job.params["words"])]

    def run(self, job, unit):
        return lambda: {"echo": unit.params["word"]}


@pytest.fixture
def echo_kind(monkeypatch):
    monkeypatch.setattr(pipelines, "_PIPELINES", dict(pipelines._PIPELINES))  # forgotten after the test
    pipeline_register(EchoPipeline())


# ---------------------------------------------------------------------------------------------------------------


def test_a_new_kind_is_one_module_and_one_registration(echo_kind, eager, users, client_for, client):
    job = job_queue(kind="echo", params={"words": ["a", "b"]})
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED, job.error
    assert sorted(u.result["echo"] for u in job.units.all()) == ["a", "b"]
    assert job.get_kind_display() == "Echo words"

    curator = client_for("curator")
    page = curator.get("/queue/echo/")
    assert page.status_code == 200 and b"Echo words" in page.content
    response = curator.post("/queue/echo/", {"words": "x y z"})
    queued = Job.objects.latest("id")
    assert response.status_code == 302 and queued.params == {"words": ["x", "y", "z"]}
    assert b"Echo words" in curator.get("/jobs/", {"kind": "echo"}).content

    api = client.post(
        f"{API}/jobs/",
        {"kind": "echo", "words": ["w"]},
        "application/json",
        HTTP_AUTHORIZATION=f"Token {user_token(user=users['curator'])}",
    )
    assert api.status_code == 202, api.content
    done = {"total": 1, "pending": 0, "done": 1, "failed": 0, "cancelled": 0, "errored": 0}
    assert api.json()["kind"] == "echo" and api.json()["progress"] == {"echo": done}
    assert curator.get("/queue/nothing/").status_code == 404


def test_progress_of_a_page_of_jobs_is_one_query_in_each_kinds_stage_order(db, django_assert_num_queries):
    jobs = [Job.objects.create(kind="synthesize", stage="rollout") for _ in range(3)]
    for job in jobs:
        # Planned in this order; the kind runs them api_synthesis, task_synthesis, rollout.
        job.units.create(stage="rollout", key="r", status="pending")
        job.units.create(stage="task_synthesis", key="t", status="failed")
        job.units.create(stage="api_synthesis", key="a", status="done")
    with django_assert_num_queries(1):
        progress = jobs_progress([job.pk for job in jobs])
    assert all(list(p) == ["api_synthesis", "task_synthesis", "rollout"] for p in progress.values())
    failed = {"total": 1, "pending": 0, "done": 0, "failed": 1, "cancelled": 0, "errored": 0}
    assert progress[jobs[0].pk]["task_synthesis"] == failed


# ---- caps --------------------------------------------------------------------------------------------------

HUGE = {"apis": 50, "tasks": 500, "rollouts": 64}  # with 3,000 domains


def _nothing_written():
    assert not Domain.objects.exists() and not Job.objects.exists()
    assert not AuditEvent.objects.filter(action__in=["domain.create", "job.create"]).exists()


def test_a_huge_synthesis_is_refused_by_the_api_naming_the_limit(db, users, client):
    body = {"kind": "synthesize", "domains": [f"d{i}" for i in range(3000)], **HUGE}
    headers = {"HTTP_AUTHORIZATION": f"Token {user_token(user=users['curator'])}"}
    response = client.post(f"{API}/jobs/", body, "application/json", **headers)
    assert response.status_code == 400
    assert response.json() == {"domains": ["at most 100 (SIMIA_MAX_DOMAINS_PER_JOB)"]}
    _nothing_written()


def test_the_product_of_the_parameters_is_capped(db, settings):
    settings.SIMIA_MAX_DOMAINS_PER_JOB = 5000
    with pytest.raises(ValidationError) as refused:
        job_queue(kind="synthesize", params={"domains": [f"d{i}" for i in range(3000)], **HUGE})
    assert refused.value.message_dict == {
        "units": ["these parameters make 96,006,000 units of work; at most 100,000 per job (SIMIA_MAX_UNITS_PER_JOB)"]
    }
    _nothing_written()
    settings.SIMIA_MAX_UNITS_PER_JOB = 12  # two domains: 2 x (2 synthesis units + tasks x rollouts)
    assert job_queue(kind="synthesize", params={"domains": ["a", "b"], "tasks": 2, "rollouts": 2}).params["tasks"] == 2
    with pytest.raises(ValidationError, match="make 16 units of work; at most 12"):
        job_queue(kind="synthesize", params={"domains": ["a", "b"], "tasks": 2, "rollouts": 3})
    with pytest.raises(CommandError, match="count: at most 12 \\(SIMIA_MAX_UNITS_PER_JOB\\)"):
        call_command("amplify", "--count", "13")


def test_the_command_refuses_naming_each_limit(db):
    domains = [arg for i in range(3000) for arg in ("--domain", f"d{i}")]
    with pytest.raises(CommandError) as refused:
        call_command("synthesize", *domains, "--apis", "51", "--tasks", "500", "--rollouts", "65")
    assert str(refused.value) == (
        "domains: at most 100 (SIMIA_MAX_DOMAINS_PER_JOB); apis: at most 50 (SIMIA_MAX_APIS_PER_DOMAIN); "
        "rollouts: at most 64 (SIMIA_MAX_ROLLOUTS_PER_TASK)"
    )
    with pytest.raises(CommandError, match="rollouts: Ensure this value is greater than or equal to 1"):
        call_command("rollout", "--domain", "shop", "--rollouts", "0")
    _nothing_written()


def test_the_queue_page_refuses_naming_the_limit_and_shows_the_bounds(client_for):
    curator = client_for("curator")
    form = curator.get("/queue/synthesis/").content.decode()
    assert 'name="apis" value="8" min="1" max="50"' in form  # the serializer's default and bounds
    response = curator.post(
        "/queue/synthesis/",
        {"domains": " ".join(f"d{i}" for i in range(3000)), **HUGE, "max_steps": 12, "max_errors": 3, "user_turns": 0},
    )
    assert response.status_code == 200
    assert "at most 100 (SIMIA_MAX_DOMAINS_PER_JOB)" in response.content.decode()
    assert not Domain.objects.exists() and not Job.objects.exists()


def test_a_rollout_job_is_capped_by_its_units_whatever_the_number_of_tasks(db, settings):
    shop = Domain.objects.create(name="shop")
    Task.objects.bulk_create(Task(domain=shop, instruction=f"task {i}", status=TaskStatus.VALID) for i in range(6))
    settings.SIMIA_MAX_UNITS_PER_JOB = 10
    with pytest.raises(ValidationError, match="make 12 units of work; at most 10"):
        job_queue(kind="rollout", params={"domain": "shop", "rollouts": 2})  # every valid task
    with pytest.raises(ValidationError, match="make 12 units of work"):
        job_queue(kind="rollout", params={"domain": "shop", "tasks": 8, "rollouts": 2})  # only 6 exist
    assert job_queue(kind="rollout", params={"domain": "shop", "tasks": 5, "rollouts": 2}).params["tasks"] == 5


def test_the_synthesis_page_gives_new_domains_a_description_and_policy(client_for):
    fields = {"apis": 3, "tasks": 1, "rollouts": 1, "max_steps": 12, "max_errors": 3, "user_turns": 0}
    response = client_for("curator").post(
        "/queue/synthesis/", {"domains": "shop, bank", "description": "A shop.", "policy": "Be kind.", **fields}
    )
    assert response.status_code == 302
    assert set(Domain.objects.values_list("name", "description", "policy")) == {
        ("shop", "A shop.", "Be kind."),
        ("bank", "A shop.", "Be kind."),
    }
