"""A job kind is one module, found when the application starts; its parameters (ranges and caps) are checked the
same way by the API, `manage.py queue` and the queue pages, and a refused job writes nothing; progress is one query
for any number of jobs."""

import sys
from io import StringIO

import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command, load_command_class
from django.core.management.base import CommandError
from django.test import override_settings

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.core.errors import ValidationFailed
from simia_web.core.models import AuditEvent
from simia_web.jobs import kinds
from simia_web.jobs.forms import job_kind_form
from simia_web.jobs.kinds import KIND_MAX_LENGTH, JobKind, job_kind_register
from simia_web.jobs.models import Job, JobStatus
from simia_web.jobs.selectors import jobs_progress
from simia_web.jobs.services import job_queue

API = "/api/v1"
EXAMPLE_APP = "tests.example_app"  # its job_kinds module holds the `echo` kind, and nothing else names it


@pytest.fixture
def example_app(settings, monkeypatch):
    """The example app installed as any app is: the job kinds are discovered again, and forgotten after the test."""
    monkeypatch.setattr(kinds, "_KINDS", dict(kinds._KINDS))
    monkeypatch.delitem(sys.modules, f"{EXAMPLE_APP}.job_kinds", raising=False)
    with override_settings(INSTALLED_APPS=[*settings.INSTALLED_APPS, EXAMPLE_APP]):
        yield


def _queue_help() -> str:
    return load_command_class("simia_web.jobs", "queue").create_parser("manage.py", "queue").format_help()


def test_a_kind_in_one_module_is_queued_by_every_way_in(example_app, eager, users, client_for, client):
    curator = client_for("curator")
    assert '<a href="/queue/echo/">Queue: Echo words</a>' in curator.get("/").content.decode()  # the dashboard
    page = curator.get("/queue/echo/")
    assert page.status_code == 200 and b"Echo words" in page.content and b'name="words"' in page.content
    response = curator.post("/queue/echo/", {"words": "x y z"})
    queued = Job.objects.latest("id")
    assert response.status_code == 302 and queued.params == {"words": ["x", "y", "z"]}
    assert queued.status == JobStatus.SUCCEEDED, queued.error
    assert sorted(u.result["echo"] for u in queued.units.all()) == ["x", "y", "z"]
    assert b"Echo words" in curator.get("/jobs/", {"kind": "echo"}).content

    headers = {"HTTP_AUTHORIZATION": f"Token {user_token(user=users['curator'])}"}
    api = client.post(f"{API}/jobs/", {"kind": "echo", "words": ["w"]}, "application/json", **headers)
    assert api.status_code == 202, api.content
    done = {"total": 1, "pending": 0, "done": 1, "failed": 0, "cancelled": 0, "errored": 0}
    assert api.json()["kind"] == "echo" and api.json()["progress"] == {"echo": done}
    listed = client.get(f"{API}/jobs/", {"kind": "echo"}, **headers).json()["results"]
    assert [job["id"] for job in listed] == [api.json()["id"], queued.pk]

    schema = client.get("/api/schema/", {"format": "json"}, **headers).json()
    request = schema["components"]["schemas"]["JobCreateRequest"]
    assert request["discriminator"]["mapping"]["echo"] == "#/components/schemas/EchoJobRequest"
    assert schema["components"]["schemas"]["EchoJobRequest"]["required"] == ["kind", "words"]

    assert "echo: Echo words" in _queue_help() and "words          list of text; required. To echo." in _queue_help()
    out = StringIO()
    call_command("queue", "echo", "--param", "words=a", "--param", "words=b", "--wait", stdout=out)
    job = Job.objects.latest("id")
    assert (job.kind, job.params, job.status) == ("echo", {"words": ["a", "b"]}, JobStatus.SUCCEEDED)
    assert f"Queued job {job.pk} (echo)." in out.getvalue()
    assert curator.get("/queue/nothing/").status_code == 404


def test_without_its_app_the_kind_is_nowhere(client_for):
    assert "echo" not in kinds.job_kinds_queueable() and "echo:" not in _queue_help()
    assert client_for("curator").get("/queue/echo/").status_code == 404


def test_a_kind_is_refused_when_it_registers_with_what_the_job_tables_cannot_hold(monkeypatch):
    monkeypatch.setattr(kinds, "_KINDS", dict(kinds._KINDS))
    assert Job._meta.get_field("kind").max_length == KIND_MAX_LENGTH

    def kind_named(name: str, **attrs) -> type[JobKind]:
        methods = {"plan": lambda self, job, stage: None, "run": lambda self, job, unit: dict}
        return type("Named", (JobKind,), {"kind": name, "label": name, "stages": ("one",), **methods, **attrs})

    with pytest.raises(ImproperlyConfigured, match=f"at most {KIND_MAX_LENGTH} characters"):
        job_kind_register(kind_named("k" * (KIND_MAX_LENGTH + 1)))
    with pytest.raises(ImproperlyConfigured, match="a slug"):
        job_kind_register(kind_named("two words"))
    with pytest.raises(ImproperlyConfigured, match="stages of at most 32"):
        job_kind_register(kind_named("long_stage", stages=("s" * 33,)))
    with pytest.raises(ImproperlyConfigured, match="registered twice"):
        job_kind_register(kind_named("rollout"))
    with pytest.raises(ImproperlyConfigured, match="the same queue page"):
        job_kind_register(kind_named("more", queue_slug="rollouts"))
    job_kind_register(kind_named("k" * KIND_MAX_LENGTH))
    assert "k" * KIND_MAX_LENGTH in dict(kinds.job_kind_choices())


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
    with pytest.raises(ValidationFailed) as refused:
        job_queue(kind="synthesize", params={"domains": [f"d{i}" for i in range(3000)], **HUGE})
    assert refused.value.errors == {
        "units": ["these parameters make 96,006,000 units of work; at most 100,000 per job (SIMIA_MAX_UNITS_PER_JOB)"]
    }
    _nothing_written()
    settings.SIMIA_MAX_UNITS_PER_JOB = 12  # two domains: 2 x (2 synthesis units + tasks x rollouts)
    assert job_queue(kind="synthesize", params={"domains": ["a", "b"], "tasks": 2, "rollouts": 2}).params["tasks"] == 2
    with pytest.raises(ValidationFailed, match="make 16 units of work; at most 12"):
        job_queue(kind="synthesize", params={"domains": ["a", "b"], "tasks": 2, "rollouts": 3})
    with pytest.raises(CommandError, match="count: at most 12 \\(SIMIA_MAX_UNITS_PER_JOB\\)"):
        call_command("queue", "amplify", "--param", "count=13")


def test_the_command_refuses_naming_each_limit(db):
    domains = [arg for i in range(3000) for arg in ("--param", f"domains=d{i}")]
    with pytest.raises(CommandError) as refused:
        call_command(
            "queue", "synthesize", *domains, "--param", "apis=51", "--param", "tasks=500", "--param", "rollouts=65"
        )
    assert str(refused.value) == (
        "domains: at most 100 (SIMIA_MAX_DOMAINS_PER_JOB); apis: at most 50 (SIMIA_MAX_APIS_PER_DOMAIN); "
        "rollouts: at most 64 (SIMIA_MAX_ROLLOUTS_PER_TASK)"
    )
    with pytest.raises(CommandError, match="rollouts: Ensure this value is greater than or equal to 1"):
        call_command("queue", "rollout", "--param", "domain=shop", "--param", "rollouts=0")
    _nothing_written()


def test_the_queue_page_refuses_naming_the_limit_and_shows_the_bounds(client_for):
    curator = client_for("curator")
    form = curator.get("/queue/synthesis/").content.decode()
    assert 'name="apis" value="8" min="1" max="50"' in form  # the serializer's default and bounds
    response = curator.post(
        "/queue/synthesis/",
        {"domains": " ".join(f"d{i}" for i in range(3000)), **HUGE, "max_steps": 12, "max_errors": 3, "user_turns": 0},
    )
    assert response.status_code == 400  # the form again, with the refusal
    assert "at most 100 (SIMIA_MAX_DOMAINS_PER_JOB)" in response.content.decode()
    assert not Domain.objects.exists() and not Job.objects.exists()


def test_every_queue_page_has_an_input_for_each_parameter_of_its_kind(db):
    for name, job_kind in kinds.job_kinds_queueable().items():
        rules = job_kind.parameters_serializer()().fields
        writable = {param for param, rule in rules.items() if not rule.read_only}
        # The endpoint profiles per stage are one list of profiles per stage ("profiles__judge").
        inputs = {field.split("__")[0] for field in job_kind_form(job_kind).base_fields}
        assert writable <= inputs, name


def test_a_rollout_job_is_capped_by_its_units_whatever_the_number_of_tasks(db, settings):
    shop = Domain.objects.create(name="shop")
    Task.objects.bulk_create(Task(domain=shop, instruction=f"task {i}", status=TaskStatus.VALID) for i in range(6))
    settings.SIMIA_MAX_UNITS_PER_JOB = 10
    with pytest.raises(ValidationFailed, match="make 12 units of work; at most 10"):
        job_queue(kind="rollout", params={"domain": "shop", "rollouts": 2})  # every valid task
    with pytest.raises(ValidationFailed, match="make 12 units of work"):
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
