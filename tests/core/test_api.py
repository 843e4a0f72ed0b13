"""The REST API: authentication and roles, filters, cursor pagination, query counts, jobs, snapshots, uploads."""

import json

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from simia_web.accounts.services import user_token
from simia_web.catalog.models import Seed
from simia_web.curation.models import JudgeVerdict, Review, RuleViolation, TrajectoryKind, TrajectoryStatus
from simia_web.exports.models import Snapshot
from simia_web.jobs.models import Job, JobStatus
from tests.exports.data import TOOLS, conversation, domain_make, task_make, trajectory_make

pytestmark = pytest.mark.django_db
API = "/api/v1"


@pytest.fixture
def token_client(client, users):
    """A test client sending `Authorization: Token <key>` for the given role."""

    def make(role: str):
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {user_token(user=users[role])}"
        return client

    return make


@pytest.fixture
def catalog():
    shop, bank = domain_make("shop"), domain_make("bank")
    task = task_make(shop, external_id="1")
    rows = {
        "accepted": trajectory_make(shop, task=task, score=0.9),
        "judged_fail": trajectory_make(shop, status=TrajectoryStatus.JUDGED_FAIL, score=0.2),
        "rules_failed": trajectory_make(
            bank,
            status=TrajectoryStatus.RULES_FAILED,
            score=None,
            kind=TrajectoryKind.AMPLIFIED,
            messages=conversation("ZEBRA-7"),
        ),
    }
    RuleViolation.objects.create(trajectory=rows["rules_failed"], code="unknown_tool", message_index=2, detail="x")
    return rows


# --- authentication and roles ---------------------------------------------------------------


@pytest.mark.parametrize("path", ["/trajectories/", "/domains/", "/jobs/", "/snapshots/", "/me/"])
def test_no_token_is_401_with_a_challenge(client, path):
    response = client.get(API + path)
    assert response.status_code == 401
    assert response["WWW-Authenticate"].startswith("Token")


def test_bad_token_is_401(client, users):
    response = client.get(f"{API}/trajectories/", HTTP_AUTHORIZATION="Token not-a-real-token")
    assert response.status_code == 401


def test_token_identifies_the_user(token_client):
    response = token_client("annotator").get(f"{API}/me/")
    assert response.status_code == 200
    assert response.json()["role"] == "annotator"


def test_session_auth_works_for_the_browser(client_for):
    assert client_for("annotator").get(f"{API}/domains/").status_code == 200


def test_annotator_reads_but_cannot_queue_export_or_upload(token_client, catalog):
    client = token_client("annotator")
    assert client.get(f"{API}/trajectories/").status_code == 200
    assert client.post(f"{API}/jobs/", {"kind": "rollout", "domain": "shop"}, "application/json").status_code == 403
    assert client.post(f"{API}/snapshots/", {"format": "openai"}, "application/json").status_code == 403
    upload = SimpleUploadedFile("s.jsonl", b"{}", content_type="application/jsonl")
    assert client.post(f"{API}/seeds/upload/", {"file": upload, "format": "openai"}).status_code == 403
    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING)
    assert client.post(f"{API}/jobs/{job.pk}/cancel/").status_code == 403
    assert not Snapshot.objects.exists()


# --- trajectories: filters, pagination, details, query counts --------------------------------


def _ids(response) -> set[int]:
    assert response.status_code == 200, response.content
    return {row["id"] for row in response.json()["results"]}


def test_trajectory_filters(token_client, catalog):
    client = token_client("annotator")
    t = {k: v.pk for k, v in catalog.items()}
    get = lambda query: _ids(client.get(f"{API}/trajectories/?{query}"))  # noqa: E731
    assert get("") == set(t.values())
    assert get("domain=shop") == {t["accepted"], t["judged_fail"]}
    assert get("status=accepted,judged_fail") == {t["accepted"], t["judged_fail"]}
    assert get("status=all&domain=bank") == {t["rules_failed"]}
    assert get("kind=amplified") == {t["rules_failed"]}
    assert get("judge_passed=false") == {t["judged_fail"]}
    assert get("min_score=0.5") == {t["accepted"]}
    assert get("max_score=0.5") == {t["judged_fail"]}
    assert get("violation=unknown_tool") == {t["rules_failed"]}
    assert get("q=zebra-7") == {t["rules_failed"]}
    assert get(f"task={catalog['accepted'].task_id}") == {t["accepted"]}
    assert client.get(f"{API}/trajectories/?status=nope").status_code == 400
    assert client.get(f"{API}/trajectories/?min_score=high").status_code == 400


def test_cursor_pagination_walks_every_row_once(token_client):
    shop = domain_make()
    made = {trajectory_make(shop).pk for _ in range(7)}
    client = token_client("annotator")
    seen: list[int] = []
    url = f"{API}/trajectories/?page_size=3"
    while url:
        body = client.get(url).json()
        assert len(body["results"]) <= 3
        seen += [row["id"] for row in body["results"]]
        url = body["next"]
    assert seen == sorted(made, reverse=True)


def test_list_is_a_summary_and_detail_the_whole_trajectory(token_client, catalog, users):
    trajectory = catalog["accepted"]
    JudgeVerdict.objects.create(trajectory=trajectory, passed=True, score=0.9, rationale="fine")
    Review.objects.create(trajectory=trajectory, reviewer=users["annotator"], decision="accept", trajectory_version=1)
    client = token_client("annotator")
    row = next(r for r in client.get(f"{API}/trajectories/").json()["results"] if r["id"] == trajectory.pk)
    assert "messages" not in row and row["domain"] == "shop"
    detail = client.get(f"{API}/trajectories/{trajectory.pk}/").json()
    assert detail["messages"] == trajectory.messages and detail["tools"] == TOOLS
    assert detail["verdicts"][0]["rationale"] == "fine"
    assert detail["reviews"][0]["reviewer"] == "annotator"
    bad = client.get(f"{API}/trajectories/{catalog['rules_failed'].pk}/").json()
    assert bad["violations"][0]["code"] == "unknown_tool"


def test_no_n_plus_one(token_client, users, django_assert_max_num_queries):
    shop = domain_make()
    for i in range(25):
        t = trajectory_make(shop, task=task_make(shop))
        RuleViolation.objects.create(trajectory=t, code="c", message_index=1)
        JudgeVerdict.objects.create(trajectory=t, passed=True, score=0.9)
        Review.objects.create(trajectory=t, reviewer=users["curator"], decision="accept", trajectory_version=1)
        Job.objects.create(kind="rollout", params={"i": i})
    client = token_client("annotator")
    with django_assert_max_num_queries(4):  # auth token+user, page
        assert len(client.get(f"{API}/trajectories/?status=all").json()["results"]) == 25
    with django_assert_max_num_queries(6):
        client.get(f"{API}/trajectories/{t.pk}/")
    with django_assert_max_num_queries(4):
        assert len(client.get(f"{API}/jobs/").json()["results"]) == 25
    for path in ("/tasks/", "/domains/", "/apis/", "/seeds/", "/snapshots/"):
        with django_assert_max_num_queries(4):
            assert client.get(API + path).status_code == 200


# --- catalog ------------------------------------------------------------------------------------


def test_domains_by_name_with_counts(token_client, catalog):
    client = token_client("annotator")
    names = [d["name"] for d in client.get(f"{API}/domains/").json()["results"]]
    assert set(names) == {"shop", "bank"}
    shop = client.get(f"{API}/domains/shop/").json()
    assert shop["task_count"] == 1 and shop["policy"] == "Be helpful."
    tasks = client.get(f"{API}/tasks/?domain=shop").json()["results"]
    assert [t["external_id"] for t in tasks] == ["1"]


def test_seed_upload_imports_and_reports_errors(token_client):
    client = token_client("curator")
    good = json.dumps({"messages": conversation(), "tools": TOOLS}) + "\n"
    response = client.post(
        f"{API}/seeds/upload/",
        {"file": SimpleUploadedFile("seeds.jsonl", good.encode()), "format": "openai", "domain": "shop"},
    )
    assert response.status_code == 201, response.content
    assert response.json()["created"]["seeds"] == 1
    assert Seed.objects.filter(domain__name="shop").count() == 1
    seeds = client.get(f"{API}/seeds/?domain=shop").json()["results"]
    assert len(seeds) == 1 and "messages" not in seeds[0]
    assert client.get(f"{API}/seeds/{seeds[0]['id']}/").json()["messages"][1]["role"] == "user"

    bad = b'{"messages": [{"role": "robot", "content": "x"}]}\n'
    response = client.post(
        f"{API}/seeds/upload/", {"file": SimpleUploadedFile("bad.jsonl", bad), "format": "openai", "domain": "shop"}
    )
    assert response.status_code == 400
    error = response.json()["errors"][0]
    assert error["file"] == "bad.jsonl" and error["line"] == 1 and "role" in error["field"]


# --- jobs ---------------------------------------------------------------------------------------


def test_curator_queues_jobs_and_services_validate(token_client):
    client = token_client("curator")
    response = client.post(
        f"{API}/jobs/", {"kind": "synthesize", "domains": ["shop"], "apis": 3, "tasks": 2}, "application/json"
    )
    assert response.status_code == 202, response.content
    job = Job.objects.get(pk=response.json()["id"])
    assert job.kind == "synthesize" and job.params["apis"] == 3 and job.created_by.username == "curator"
    assert response.json()["status"] == "queued"

    bad = client.post(f"{API}/jobs/", {"kind": "rollout", "domain": "nowhere"}, "application/json")
    assert bad.status_code == 400 and "domain" in bad.json()
    bad = client.post(f"{API}/jobs/", {"kind": "synthesize", "domains": ["shop"], "apis": 999}, "application/json")
    assert bad.status_code == 400 and "apis" in bad.json()
    bad = client.post(f"{API}/jobs/", {"kind": "amplify"}, "application/json")
    assert bad.status_code == 400 and "count" in bad.json()
    bad = client.post(f"{API}/jobs/", {"kind": "export"}, "application/json")
    assert bad.status_code == 400 and bad.json() == {
        "kind": ["choose one of amplify, calibrate, fidelity, rollout, synthesize"]
    }
    bad = client.post(f"{API}/jobs/", {"kind": ["synthesize"], "domains": ["shop"]}, "application/json")
    assert bad.status_code == 400 and "kind" in bad.json()
    assert client.post(f"{API}/jobs/", [{"kind": "synthesize"}], "application/json").status_code == 400
    bad = client.post(f"{API}/jobs/", {"kind": "synthesize", "domains": ["ok", "Not a slug"]}, "application/json")
    assert bad.status_code == 400 and bad.json()["domains"][0].startswith("item 2: ")


def test_job_detail_progress_and_cancel(token_client):
    client = token_client("curator")
    job = Job.objects.create(kind="rollout", status=JobStatus.RUNNING, stage="rollout")
    job.units.create(stage="rollout", key="a")
    job.units.create(stage="rollout", key="b", status="done")
    detail = client.get(f"{API}/jobs/{job.pk}/").json()
    assert detail["progress"] == {
        "rollout": {"total": 2, "pending": 1, "done": 1, "failed": 0, "cancelled": 0, "errored": 0}
    }
    assert detail["usage"]["llm_calls"] == 0
    listed = client.get(f"{API}/jobs/?status=running").json()["results"]
    assert listed[0]["progress"] == detail["progress"]
    assert client.post(f"{API}/jobs/{job.pk}/cancel/").json()["status"] == "cancelled"
    assert client.post(f"{API}/jobs/{job.pk}/cancel/").status_code == 409


# --- snapshots ----------------------------------------------------------------------------------


def test_snapshot_request_is_accepted_with_a_job(token_client, catalog):
    client = token_client("curator")
    response = client.post(
        f"{API}/snapshots/", {"format": "sharegpt", "filters": {"domain": "shop"}}, "application/json"
    )
    assert response.status_code == 202, response.content
    body = response.json()
    assert body["status"] == "queued" and body["filters"] == {"domain": "shop", "status": "accepted"}
    assert Job.objects.get(pk=body["job"]).kind == "export"
    assert client.get(f"{API}/snapshots/{body['id']}/download/").status_code == 409
    made = client.get(f"{API}/jobs/{body['job']}/").json()["summary"]
    assert (made["snapshot"], made["built"]) == (body["id"], False)
    bad = client.post(f"{API}/snapshots/", {"format": "openai", "filters": {"status": "nope"}}, "application/json")
    assert bad.status_code == 400
    bad = client.post(f"{API}/snapshots/", {"format": "csv"}, "application/json")
    assert bad.status_code == 400


def test_seed_upload_form_errors_have_the_import_error_shape(token_client):
    response = token_client("curator").post(f"{API}/seeds/upload/", {"format": "xml"})
    assert response.status_code == 400
    body = response.json()
    assert body["total"] == 2 and {e["field"] for e in body["errors"]} == {"file", "format"}
