"""Agreement math, the dashboard, job pages and catalog editing."""

import pytest

from simia_web.accounts.models import default_workspace_id
from simia_web.catalog.models import Api, Seed, Task
from simia_web.core.services import versioned_update
from simia_web.curation.models import Review, Trajectory
from simia_web.curation.rollups import RollupChange
from simia_web.curation.selectors.agreement import agreement, cohen_kappa
from simia_web.jobs.models import Job, JobStatus, JobUnit, UnitStatus
from simia_web.llm.models import EndpointProfile, LLMCall
from tests.support.factories import TOOLS, conversation, make_job, make_trajectory, verdict


def test_kappa_on_a_known_matrix():
    # The textbook example: 20 yes/yes, 5 yes/no, 10 no/yes, 15 no/no → po 0.7, pe 0.5, kappa 0.4.
    matrix = {(True, True): 20, (True, False): 5, (False, True): 10, (False, False): 15}
    assert cohen_kappa(matrix) == pytest.approx(0.4)
    assert cohen_kappa({}) is None
    assert cohen_kappa({(True, True): 3}) == 1.0
    assert cohen_kappa({(True, True): 1, (False, False): 1}) == pytest.approx(1.0)


def _reviewed(users, judge_passed, decision, scores, **kwargs):
    t = make_trajectory(judge=verdict(passed=judge_passed, scores=scores), **kwargs)
    change = RollupChange([t.pk])
    Review.objects.create(trajectory=t, reviewer=users["annotator"], decision=decision, trajectory_version=1)
    change.record()
    return t


def test_agreement_page_matrix_kappa_and_criteria(client_for, users):
    for _ in range(20):
        _reviewed(users, True, "accept", {"task_completed": 1.0, "tool_use_correct": 0.8})
    for _ in range(5):
        _reviewed(users, True, "reject", {"task_completed": 0.5, "tool_use_correct": 0.8})
    for _ in range(10):
        _reviewed(users, False, "fix_accept", {"task_completed": 1.0, "tool_use_correct": 0.8}, domain="bank")
    for _ in range(15):
        _reviewed(users, False, "reject", {"task_completed": 0.5, "tool_use_correct": 0.8})
    make_trajectory(judge=verdict())  # not reviewed: left out
    result = agreement(workspace_ids=[default_workspace_id()])
    assert result["cells"] == {"pass_accept": 20, "pass_reject": 5, "fail_accept": 10, "fail_reject": 15}
    assert result["kappa"] == pytest.approx(0.4)
    by_name = {c["name"]: c for c in result["criteria"]}
    assert by_name["task_completed"]["accepted"] == pytest.approx(1.0)
    assert by_name["task_completed"]["rejected"] == pytest.approx(0.5)
    assert by_name["tool_use_correct"]["gap"] == pytest.approx(0.0)
    body = client_for("annotator").get("/agreement/").content.decode()
    assert "κ = 0.400" in body
    assert 'id="cell-fail-accept"><a href="/review/?verdict=fail&amp;status=accepted">10</a>' in body
    bank = client_for("annotator").get("/agreement/", {"domain": result and _domain_id("bank")})
    assert bank.context["a"]["total"] == 10 and bank.context["a"]["cells"]["fail_accept"] == 10
    assert 'href="/review/?domain=bank&amp;verdict=fail&amp;status=accepted"' in bank.content.decode()


def test_bulk_decisions_are_counted_apart_from_agreement(client_for, users):
    from simia_web.curation.services import review_decide, reviews_bulk

    individual = make_trajectory(judge=verdict(passed=True))
    review_decide(trajectory=individual, reviewer=users["annotator"], decision="accept", expected_version=1)
    bulk = [make_trajectory(judge=verdict(passed=True)) for _ in range(3)]
    reviews_bulk(
        trajectories=Trajectory.objects.filter(pk__in=[t.pk for t in bulk]),
        reviewer=users["curator"],
        decision="accept",
    )
    result = agreement(workspace_ids=[default_workspace_id()])
    assert result["total"] == 1 and result["bulk"] == 3
    body = client_for("annotator").get("/agreement/").content.decode()
    assert "3 items decided only in bulk" in body


def _domain_id(name):
    from simia_web.catalog.models import Domain

    return Domain.objects.get(name=name).pk


def test_agreement_filters_by_judge_profile(users):
    profile = EndpointProfile.objects.create(name="judge-b", model="b")
    t = _reviewed(users, True, "reject", {})
    change = RollupChange([t.pk])
    t.verdicts.update(profile=profile)
    change.record()
    _reviewed(users, True, "accept", {})
    assert agreement(workspace_ids=[default_workspace_id()], profile=profile.pk)["total"] == 1
    assert agreement(workspace_ids=[default_workspace_id()])["total"] == 2


def test_agreement_queries_are_bounded(client_for, users, django_assert_max_num_queries):
    for i in range(40):
        _reviewed(users, i % 2 == 0, "accept" if i % 3 else "reject", {"task_completed": 0.5})
    client = client_for("annotator")
    with django_assert_max_num_queries(10):
        assert client.get("/agreement/").status_code == 200
    with django_assert_max_num_queries(14):
        assert client.get("/").status_code == 200


def test_dashboard_counts_and_running_jobs(client_for):
    job = make_job()
    make_trajectory(judge=verdict(passed=False))
    body = client_for("annotator").get("/").content.decode()
    assert f'hx-get="/jobs/{job.pk}/progress/"' in body and "every 2s" in body
    assert "Judge: fail" in body


def test_progress_polls_until_the_job_ends(client_for):
    job = make_job()
    JobUnit.objects.create(job=job, stage="rollout", key="a", status=UnitStatus.DONE)
    JobUnit.objects.create(job=job, stage="rollout", key="b")
    client = client_for("annotator")
    response = client.get(f"/jobs/{job.pk}/progress/")
    assert response.status_code == 200
    body = response.content.decode()
    assert 'hx-trigger="every 2s"' in body and '<span class="done-count">1</span>/2' in body
    Job.objects.filter(pk=job.pk).update(status=JobStatus.SUCCEEDED)
    response = client.get(f"/jobs/{job.pk}/progress/")
    assert response.status_code == 286 and "hx-trigger" not in response.content.decode()


def test_job_detail_cancel_and_retry(client_for):
    job = make_job()
    for i in range(30):
        LLMCall.objects.create(stage="agent", model="m", request_hash=str(i), request={}, job=job, tokens_in=10)
    make_trajectory(judge=verdict(passed=False), violations=["unknown_tool"], job=job)
    client = client_for("curator")
    response = client.get(f"/jobs/{job.pk}/")
    body = response.content.decode()
    assert "unknown_tool" in body and "judge fail" in body and "300 / 0" in body
    assert len(response.context["page"]) == 25  # the call log paginates
    client.post(f"/jobs/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.status == JobStatus.CANCELLED
    response = client.post(f"/jobs/{job.pk}/retry/")
    new = Job.objects.exclude(pk=job.pk).get()
    assert response["Location"] == f"/jobs/{new.pk}/" and new.params == job.params


def test_the_job_list_filters_as_the_api_does(client_for):
    running = make_job(status=JobStatus.RUNNING)
    make_job(status=JobStatus.SUCCEEDED)
    Job.objects.create(kind="judge", status=JobStatus.RUNNING, params={"versions": {}})
    client = client_for("annotator")
    query = {"status": "running", "kind": running.kind}
    api = client.get("/api/v1/jobs/", query).json()["results"]
    assert [job.pk for job in client.get("/jobs/", query).context["page"]] == [job["id"] for job in api]
    assert [job["id"] for job in api] == [running.pk]
    # A value the API refuses is refused by the page too, rather than ignored.
    assert client.get("/jobs/", {"status": "yes"}).status_code == 400
    assert client.get("/api/v1/jobs/", {"status": "yes"}).status_code == 400


def test_llm_call_viewer_escapes(client_for):
    call = LLMCall.objects.create(
        stage="judge", model="m", request_hash="h", request={"messages": [{"content": "<script>x</script>"}]}
    )
    body = client_for("admin").get(f"/llm/calls/{call.pk}/").content.decode()
    assert "&lt;script&gt;x&lt;/script&gt;" in body and "<script>x" not in body


def test_job_pages_bounded_queries(client_for, django_assert_max_num_queries):
    job = make_job()
    for i in range(60):
        LLMCall.objects.create(stage="agent", model="m", request_hash=str(i), request={}, job=job)
        make_job(status=JobStatus.SUCCEEDED)
    client = client_for("annotator")
    with django_assert_max_num_queries(10):
        client.get("/jobs/")
    with django_assert_max_num_queries(16):
        client.get(f"/jobs/{job.pk}/")


# ---------------------------------------------------------------- catalog


@pytest.fixture
def api(db):
    t = make_trajectory(judge=verdict())
    return Api.objects.create(domain=t.domain, name="cancel_order", parameters=TOOLS[0]["function"]["parameters"])


def test_api_edit_with_history_and_diff(client_for, api):
    client = client_for("curator")
    params = '{"type": "object", "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}}}'
    response = client.post(
        f"/apis/{api.pk}/",
        {
            "version": 1,
            "description": "Cancel a pending order",
            "kind": "write",
            "parameters": params,
            "returns": "{}",
            "note": "add reason",
        },
    )
    assert response.status_code == 302
    api.refresh_from_db()
    assert api.version == 2 and api.kind == "write" and "reason" in api.parameters["properties"]
    body = client.get(f"/apis/{api.pk}/").content.decode()
    assert "add reason" in body and 'class="add">+' in body


def test_api_edit_invalid_schema_is_refused(client_for, api):
    response = client_for("curator").post(
        f"/apis/{api.pk}/", {"version": 1, "kind": "read", "parameters": '{"type": "banana"}', "returns": "{}"}
    )
    assert response.status_code == 200 and "errorlist" in response.content.decode()
    api.refresh_from_db()
    assert api.version == 1


def test_task_edit_conflict_keeps_both(client_for, api):
    task = Task.objects.create(domain=api.domain, instruction="Cancel W1", apis_needed=["cancel_order"])
    versioned_update(obj=task, expected_version=1, fields={"instruction": "Cancel W1 today"})
    response = client_for("curator").post(
        f"/tasks/{task.pk}/", {"version": 1, "instruction": "My edit", "apis_needed": '["cancel_order"]'}
    )
    body = response.content.decode()
    assert response.status_code == 409 and "someone else changed this" in body and "now version 2" in body
    assert "My edit" in body  # the user's text is kept in the form
    task.refresh_from_db()
    assert task.instruction == "Cancel W1 today"


def test_seed_edit(client_for, api):
    import json

    seed = Seed.objects.create(domain=api.domain, source_format="openai", messages=conversation(), tools=TOOLS)
    messages = conversation(answer="Cancelled W1 for you.")
    response = client_for("curator").post(
        f"/seeds/{seed.pk}/", {"version": 1, "messages": json.dumps(messages), "tools": json.dumps(TOOLS)}
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    seed.refresh_from_db()
    assert seed.version == 2 and seed.messages[-1]["content"] == "Cancelled W1 for you."


def test_catalog_lists_bounded(client_for, api, django_assert_max_num_queries):
    for i in range(40):
        Task.objects.create(domain=api.domain, instruction=f"task {i}")
        Api.objects.create(domain=api.domain, name=f"api_{i}", parameters={"type": "object"})
    client = client_for("annotator")
    for url in ["/domains/", "/apis/", "/tasks/", "/seeds/", f"/domains/{api.domain.name}/"]:
        with django_assert_max_num_queries(10):
            assert client.get(url).status_code == 200


def test_queue_rollouts_and_synthesis_forms(client_for, api, settings):
    client = client_for("curator")
    form = {"domain": api.domain.name, "rollouts": 2, "max_steps": 5, "max_errors": 2, "user_turns": 0}
    response = client.post("/queue/rollouts/", form)
    assert "has no valid task to roll out" in response.content.decode() and not Job.objects.exists()
    Task.objects.create(domain=api.domain, instruction="Cancel order W1.")
    response = client.post("/queue/rollouts/", form)
    job = Job.objects.get(kind="rollout")
    assert response["Location"] == f"/jobs/{job.pk}/" and job.params["rollouts"] == 2
    response = client.post(
        "/queue/synthesis/",
        {
            "domains": "travel, food",
            "apis": 3,
            "tasks": 2,
            "rollouts": 1,
            "max_steps": 5,
            "max_errors": 2,
            "user_turns": 0,
        },
    )
    job = Job.objects.get(kind="synthesize")
    assert job.params["domains"] == ["travel", "food"]
    response = client.post(
        "/queue/synthesis/",
        {
            "domains": "Not A Slug!",
            "apis": 3,
            "tasks": 2,
            "rollouts": 1,
            "max_steps": 5,
            "max_errors": 2,
            "user_turns": 0,
        },
    )
    assert response.status_code == 400 and "errorlist" in response.content.decode()  # the form again


def test_queue_amplification_form(client_for, api):
    seed = Seed.objects.create(domain=api.domain, source_format="openai", messages=conversation(), tools=TOOLS)
    client = client_for("curator")
    assert client.get("/queue/amplify/", {"domain": api.domain.name}).status_code == 200
    response = client.post(
        "/queue/amplify/",
        {
            "count": 4,
            "domain": api.domain.name,
            "seed_ids": str(seed.pk),
            "strategy": "random",
            "rng_seed": 7,
            "min_messages": 3,
            "max_messages": 40,
        },
    )
    job = Job.objects.get(kind="amplify")
    assert response["Location"] == f"/jobs/{job.pk}/"
    assert job.params["count"] == 4 and job.params["seeds"] == [seed.pk] and job.params["rng_seed"] == 7
    response = client.post(
        "/queue/amplify/",
        {"count": 4, "seed_ids": "999999", "strategy": "round_robin", "min_messages": 3, "max_messages": 40},
    )
    assert response.status_code == 400 and "no seed with id 999999" in response.content.decode()
