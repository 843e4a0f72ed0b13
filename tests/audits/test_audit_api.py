"""Audits over REST: the exact shapes of the issue, the roles, each bad input as a 400 naming its field, decisions
through the trajectories' review endpoint, the sample cursor-paged, and accepting the rest at the ceiling."""

import json

import pytest
from django.test import Client

from simia_web.accounts.services import user_token
from simia_web.audits.models import Audit
from simia_web.curation.models import Review, TrajectoryStatus
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db
API = "/api/v1/audits"
INTERVAL_KEYS = {"error_rate", "low", "high", "confidence", "method"}


@pytest.fixture
def as_role(users):
    """A client of its own per role, signed in with the role's token."""

    def make(role: str):
        return Client(HTTP_AUTHORIZATION=f"Token {user_token(user=users[role])}")

    return make


def post(client, path: str, body: dict):
    return client.post(path, json.dumps(body), content_type="application/json")


def population(n: int, domain: str = "shop"):
    return [
        make_trajectory(domain, judge=verdict(passed=i % 4 != 0, score=0.4 if i % 4 == 0 else 0.9)) for i in range(n)
    ]


def create(client, **body):
    given = {"filters": {"domain": "shop"}, "sample_size": 5, "strategy": "uniform", "seed": 7, **body}
    return post(client, f"{API}/", given)


def test_a_curator_creates_an_audit_and_reads_it_with_both_blocks_null_until_the_first_decision(as_role):
    population(12)
    client = as_role("curator")
    created = create(client, strategy="active", blind=False)
    assert created.status_code == 201
    body = created.json()
    assert {"id", "population", "sample_size", "strategy", "seed", "blind", "filters"} <= set(body)
    assert (body["population"], body["sample_size"], body["strategy"], body["blind"]) == (12, 5, "active", False)
    assert body["filters"] == {"domain": "shop"}

    detail = client.get(f"{API}/{body['id']}/").json()
    assert (detail["population"], detail["sample_size"], detail["decided"]) == (12, 5, 0)
    assert detail["estimate"] is None and detail["human_only"] is None and detail["per_criterion"] == {}
    assert detail["decisions_needed"] is None


def test_decisions_through_the_review_endpoint_count_and_fill_both_blocks(as_role):
    population(12)
    client = as_role("curator")
    audit_id = create(client, sample_size=6).json()["id"]
    annotator = as_role("annotator")
    items = annotator.get(f"{API}/{audit_id}/items/").json()["results"]
    assert [item["position"] for item in items] == list(range(6))
    assert all(set(item) >= {"id", "decided", "inclusion_probability"} for item in items)
    assert all(item["inclusion_probability"] == pytest.approx(6 / 12) and not item["decided"] for item in items)

    first, second = items[0]["id"], items[1]["id"]
    assert post(annotator, f"/api/v1/trajectories/{first}/reviews/", {"decision": "accept", "version": 1}).status_code
    reviewed = post(
        annotator, f"/api/v1/trajectories/{second}/reviews/", {"decision": "reject", "version": 1, "reason": "no"}
    )
    assert reviewed.status_code == 201

    detail = annotator.get(f"{API}/{audit_id}/").json()
    assert detail["decided"] == 2 and detail["rejected"] == 1
    for block in ("estimate", "human_only"):
        assert set(detail[block]) == INTERVAL_KEYS
        assert detail[block]["low"] <= detail[block]["error_rate"] <= detail[block]["high"]
        assert detail[block]["confidence"] == 0.95
    assert detail["human_only"]["error_rate"] == pytest.approx(0.5)
    items = annotator.get(f"{API}/{audit_id}/items/").json()["results"]
    assert [item["decided"] for item in items[:3]] == [True, True, False]


def test_the_items_are_cursor_paged_in_the_draw_order(as_role):
    population(30)
    client = as_role("curator")
    audit_id = create(client, sample_size=12).json()["id"]
    page = client.get(f"{API}/{audit_id}/items/?page_size=5").json()
    positions = [item["position"] for item in page["results"]]
    while page["next"]:
        page = client.get(page["next"]).json()
        positions += [item["position"] for item in page["results"]]
    assert positions == list(range(12))
    assert client.get(f"{API}/{audit_id}/items/?cursor=cD1hYmM%3D").status_code == 400


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"filters": {"colour": "red"}}, "filters"),
        ({"filters": {"domain": "nowhere"}}, "filters"),
        ({"filters": {"status": "lost"}}, "filters.status"),
        ({"filters": "domain=shop"}, "filters"),
        ({"sample_size": 0}, "sample_size"),
        ({"sample_size": 13}, "sample_size"),
        ({"strategy": "greedy"}, "strategy"),
        ({"seed": -3}, "seed"),
    ],
)
def test_each_bad_input_is_a_400_naming_the_field(as_role, body, field):
    population(12)
    refused = create(as_role("curator"), **body)
    assert refused.status_code == 400
    assert field in refused.json(), refused.json()
    assert not Audit.objects.exists()


def test_an_unknown_filter_is_named(as_role):
    population(3)
    refused = create(as_role("curator"), filters={"colour": "red"}).json()
    assert "colour" in refused["filters"][0]


def test_roles_annotators_read_and_curators_and_admins_write(as_role, client):
    population(12)
    assert create(client).status_code in (401, 403)
    assert create(as_role("annotator")).status_code == 403
    audit_id = create(as_role("admin")).json()["id"]
    annotator = as_role("annotator")
    assert annotator.get(f"{API}/").status_code == 200
    assert annotator.get(f"{API}/{audit_id}/").status_code == 200
    assert post(annotator, f"{API}/{audit_id}/accept-rest/", {"max_error_rate": 0.5}).status_code == 403
    assert as_role("curator").get(f"{API}/999999/").status_code == 404


def test_accept_rest_is_refused_above_the_ceiling_and_accepts_at_it(as_role):
    population(20)
    curator = as_role("curator")
    audit_id = create(curator, sample_size=15, filters={}).json()["id"]
    annotator = as_role("annotator")
    refused = post(curator, f"{API}/{audit_id}/accept-rest/", {"max_error_rate": 0.5})
    assert refused.status_code == 400 and "no estimate yet" in refused.json()["max_error_rate"][0]
    for item in annotator.get(f"{API}/{audit_id}/items/?page_size=50").json()["results"]:
        post(annotator, f"/api/v1/trajectories/{item['id']}/reviews/", {"decision": "accept", "version": 1})
    high = curator.get(f"{API}/{audit_id}/").json()["estimate"]["high"]

    refused = post(curator, f"{API}/{audit_id}/accept-rest/", {"max_error_rate": round(high - 0.005, 4)})
    assert refused.status_code == 400
    message = refused.json()["max_error_rate"][0]
    assert f"{high:.1%}" in message and "ceiling" in message

    accepted = post(curator, f"{API}/{audit_id}/accept-rest/", {"max_error_rate": high})
    assert accepted.status_code == 201, accepted.json()
    body = accepted.json()
    assert body["accepted"] == 5 and body["job"] is None and body["high"] == pytest.approx(high)
    assert Review.objects.filter(audit=audit_id, bulk=True).count() == 5
    assert curator.get(f"{API}/{audit_id}/").json()["accepted_on_evidence"] == 5
    assert not Review.objects.filter(audit=audit_id).exclude(trajectory__status=TrajectoryStatus.ACCEPTED).exists()
    refused = post(curator, f"{API}/{audit_id}/accept-rest/", {"max_error_rate": "lots"})
    assert refused.status_code == 400 and "max_error_rate" in refused.json()


@pytest.fixture
def built_in_process(eager, settings, tmp_path):
    """Jobs run in-process (a snapshot's build, a bulk decision), writing files in a scratch folder."""
    settings.EXPORTS_DIR = tmp_path / "exports"
    return settings.EXPORTS_DIR


def _file(exports_dir, snapshot: dict, kind: str) -> bytes:
    from simia_web.exports.models import Snapshot

    entry = Snapshot.objects.get(pk=snapshot["id"]).file_entry(kind)
    return (exports_dir / entry["path"]).read_bytes()


def test_a_certified_snapshot_is_refused_above_the_ceiling_and_carries_the_audit_block(as_role, built_in_process):
    population(20)
    curator = as_role("curator")
    audit_id = create(curator, sample_size=15, filters={}).json()["id"]
    annotator = as_role("annotator")
    for item in annotator.get(f"{API}/{audit_id}/items/?page_size=50").json()["results"]:
        post(annotator, f"/api/v1/trajectories/{item['id']}/reviews/", {"decision": "accept", "version": 1})
    high = curator.get(f"{API}/{audit_id}/").json()["estimate"]["high"]
    assert post(curator, f"{API}/{audit_id}/accept-rest/", {"max_error_rate": high}).status_code == 201

    snapshot = {"format": "openai", "filters": {"status": "accepted"}, "audit": audit_id}
    refused = post(curator, "/api/v1/snapshots/", {**snapshot, "max_error_rate": round(high - 0.01, 4)})
    assert refused.status_code == 400
    message = refused.json()["max_error_rate"][0]
    assert f"{high:.1%}" in message and f"{high - 0.01:.1%}" in message
    assert post(curator, "/api/v1/snapshots/", {**snapshot}).json() == {
        "max_error_rate": ["certifying by an audit needs a ceiling (`max_error_rate`)"]
    }
    assert "audit" in post(curator, "/api/v1/snapshots/", {**snapshot, "audit": 999, "max_error_rate": 1}).json()

    created = post(curator, "/api/v1/snapshots/", {**snapshot, "max_error_rate": high})
    assert created.status_code == 202, created.json()
    built = curator.get(f"/api/v1/snapshots/{created.json()['id']}/").json()
    assert built["status"] == "succeeded" and built["count"] == 20
    assert built["audit"] == {"audit": audit_id, "max_error_rate": pytest.approx(high)}

    report = json.loads(_file(built_in_process, built, "report"))
    block = report["audit"]
    assert block["id"] == audit_id and block["population"] == 20 and block["strategy"] == "uniform"
    assert block["audited"] == 15 and block["records_accepted_on_evidence"] == 5
    assert block["max_error_rate"] == pytest.approx(high)
    for name in ("estimate", "human_only"):
        assert set(block[name]) == INTERVAL_KEYS and block[name]["confidence"] == 0.95
    assert block["judge"] and block["judge"][0]["model"] == "stub-model"

    card = _file(built_in_process, built, "card").decode()
    assert "## Audit" in card and "with 95% confidence" in card and f"Audit {audit_id} froze a population" in card

    lines = [json.loads(line) for line in _file(built_in_process, built, "manifest").splitlines()]
    assert len(lines) == 20 and all(line["audit"] == audit_id for line in lines)
    assert sum(line["accepted_on_audit_evidence"] for line in lines) == 5
    assert {"trajectory_id", "decision_id", "sha256"} <= set(lines[0])


def test_criterion_ratings_of_decided_items_give_per_criterion_figures(as_role, users):
    from simia_web.calibration.services import rating_save

    population(12)
    curator = as_role("curator")
    audit_id = create(curator, sample_size=6).json()["id"]
    annotator = as_role("annotator")
    items = annotator.get(f"{API}/{audit_id}/items/").json()["results"]
    for i, item in enumerate(items[:4]):
        grade = 0.2 if i == 0 else 0.9  # one of the four fails the criterion in a person's eyes
        rating_save(
            trajectory_id=item["id"], annotator=users["annotator"], text_version=1, scores={"task_completed": grade}
        )
        post(annotator, f"/api/v1/trajectories/{item['id']}/reviews/", {"decision": "accept", "version": 1})
    # A rating of an item nobody decided does not count.
    rating_save(
        trajectory_id=items[5]["id"], annotator=users["annotator"], text_version=1, scores={"policy_followed": 0.1}
    )
    figures = annotator.get(f"{API}/{audit_id}/").json()["per_criterion"]
    assert set(figures) == {"task_completed"}
    row = figures["task_completed"]
    assert row["rated"] == 4 and row["human_only"]["error_rate"] == pytest.approx(0.25)
    assert set(row["estimate"]) == INTERVAL_KEYS and 0 <= row["judge_only"] <= 1
