"""Audit pages: the list and its form (curators), the figures and the plot, the stream of items with the judge
hidden until a decision when blind, holds and version checks, accept-the-rest at the ceiling, and the roles."""

import re

import pytest

from simia_web.audits.models import Audit
from simia_web.audits.services import audit_claim_next, audit_create
from simia_web.curation.models import Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import review_decide, trajectory_reserve
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db
RATIONALE = "The agent cancelled the wrong order."


def population(n: int):
    return [
        make_trajectory(judge=verdict(passed=i % 3 != 0, score=0.35 if i % 3 == 0 else 0.9, rationale=RATIONALE))
        for i in range(n)
    ]


@pytest.fixture
def audit(users):
    population(12)
    return audit_create(filters={}, sample_size=8, strategy="uniform", seed=1, actor=users["curator"])


def test_a_curator_creates_an_audit_from_the_form(client_for):
    population(10)
    client = client_for("curator")
    page = client.get("/audits/")
    assert page.status_code == 200 and b"New audit" in page.content
    created = client.post(
        "/audits/",
        {"domain": "shop", "status": "pending", "sample_size": 4, "strategy": "active", "seed": 3, "blind": "on"},
    )
    audit = Audit.objects.get()
    assert created.status_code == 302 and created["Location"] == f"/audits/{audit.pk}/"
    assert (audit.population, audit.sample_size, audit.strategy, audit.blind) == (10, 4, "active", True)
    assert audit.filters == {"domain": "shop", "status": "pending"}


def test_the_form_names_what_is_wrong(client_for):
    population(3)
    client = client_for("curator")
    refused = client.post("/audits/", {"sample_size": 9, "strategy": "uniform", "other": "colour=red"})
    assert refused.status_code == 400 and b"unknown filter colour" in refused.content
    refused = client.post("/audits/", {"sample_size": 9, "strategy": "uniform"})
    assert refused.status_code == 400 and b"larger than the population (3" in refused.content
    assert not Audit.objects.exists()


def test_annotators_see_audits_but_cannot_create_one_or_accept_the_rest(client_for, audit):
    client = client_for("annotator")
    page = client.get("/audits/")
    assert page.status_code == 200 and b"New audit" not in page.content
    assert client.post("/audits/", {"sample_size": 2, "strategy": "uniform"}).status_code == 403
    assert client.get(f"/audits/{audit.pk}/").status_code == 200
    assert client.post(f"/audits/{audit.pk}/accept-rest/", {"max_error_rate": "50"}).status_code == 403
    assert client.post(f"/audits/{audit.pk}/blind/", {"blind": "0"}).status_code == 403


def test_anonymous_visitors_are_sent_to_sign_in(client, audit):
    assert client.get("/audits/")["Location"].startswith("/accounts/login/")
    assert client.get(f"/audits/{audit.pk}/")["Location"].startswith("/accounts/login/")


def test_blind_items_hide_the_judge_until_decided(client_for, users, audit):
    client = client_for("annotator")
    opened = client.post(f"/audits/{audit.pk}/next/")
    first = audit.items.get(position=0).trajectory_id
    assert opened["Location"] == f"/audits/{audit.pk}/items/{first}/?stream=1"
    page = client.get(opened["Location"]).content.decode()
    assert 'id="judge-hidden"' in page and RATIONALE not in page and "cited by judge" not in page
    assert 'id="stream-bar"' in page and 'id="accept-btn"' in page
    assert Trajectory.objects.get(pk=first).reserved_by == users["annotator"]

    decided = client.post(
        f"/audits/{audit.pk}/items/{first}/decide/?stream=1", {"decision": "reject", "version": 1, "reason": "wrong"}
    )
    second = audit.items.get(position=1).trajectory_id
    assert decided["Location"] == f"/audits/{audit.pk}/items/{second}/?stream=1"
    after = client.get(f"/audits/{audit.pk}/items/{first}/").content.decode()
    assert RATIONALE in after and 'id="judge-hidden"' not in after and 'id="audit-decided"' in after


def test_an_audit_that_is_not_blind_shows_the_judge_at_once(client_for, audit):
    client = client_for("curator")
    assert client.post(f"/audits/{audit.pk}/blind/", {"blind": "0"}).status_code == 302
    first = audit.items.get(position=0).trajectory_id
    assert RATIONALE in client.get(f"/audits/{audit.pk}/items/{first}/").content.decode()


def test_a_stale_decision_is_refused_and_one_on_a_held_item_too(client_for, users, audit):
    first = Trajectory.objects.get(pk=audit.items.get(position=0).trajectory_id)
    trajectory_reserve(trajectory=first, user=users["admin"])
    client = client_for("annotator")
    held = client.post(f"/audits/{audit.pk}/items/{first.pk}/decide/", {"decision": "accept", "version": 1})
    assert held.status_code == 409 and b"admin" in held.content
    Trajectory.objects.filter(pk=first.pk).update(reserved_by=None, reserved_until=None)
    review_decide(trajectory=first, reviewer=users["curator"], decision="accept", expected_version=1)
    stale = client.post(
        f"/audits/{audit.pk}/items/{first.pk}/decide/", {"decision": "accept", "version": 1}, HTTP_HX_REQUEST="true"
    )
    assert stale.status_code == 409 and b'id="conflict"' in stale.content


def test_the_stream_skips_ahead_and_undo_takes_a_decision_back(client_for, audit):
    client = client_for("annotator")
    order = list(audit.items.order_by("position").values_list("trajectory_id", flat=True))
    client.post(f"/audits/{audit.pk}/next/")
    skipped = client.post(f"/audits/{audit.pk}/next/", {"after": 0})
    assert skipped["Location"] == f"/audits/{audit.pk}/items/{order[1]}/?stream=1"
    client.post(f"/audits/{audit.pk}/items/{order[1]}/decide/?stream=1", {"decision": "accept", "version": 1})
    review = Review.objects.get(trajectory_id=order[1])
    toast = client.get(f"/audits/{audit.pk}/items/{order[2]}/?stream=1").content.decode()
    assert f"/audits/{audit.pk}/reviews/{review.pk}/undo/" in toast
    undone = client.post(f"/audits/{audit.pk}/reviews/{review.pk}/undo/")
    assert undone["Location"] == f"/audits/{audit.pk}/items/{order[1]}/?stream=1"
    assert Review.objects.get(pk=review.pk).undone_at is not None


def test_the_audit_page_shows_both_intervals_the_plot_and_the_judge_alone(client_for, users, audit):
    annotator = users["annotator"]
    for i in range(6):
        claimed = Trajectory.objects.get(pk=audit_claim_next(audit=audit, user=annotator).pk)
        decision = "reject" if i % 2 else "accept"
        review_decide(trajectory=claimed, reviewer=annotator, decision=decision, expected_version=1, reason="no")
    page = client_for("annotator").get(f"/audits/{audit.pk}/").content.decode()
    assert re.search(r'id="decided">6</strong> of 8 planned', page)
    assert 'id="interval-estimate"' in page and 'id="interval-human"' in page and 'id="judge-only"' in page
    assert '<svg class="chart"' in page and "<polygon" in page and "stroke-dasharray" in page
    assert "50.0%" in page  # 3 of 6 rejected
    assert "with 95% confidence" in page


def test_accept_the_rest_on_the_page_is_refused_above_the_ceiling_then_done(client_for, users):
    population(12)
    audit = audit_create(filters={}, sample_size=10, strategy="uniform", seed=2, actor=users["curator"])
    for _ in range(10):
        claimed = Trajectory.objects.get(pk=audit_claim_next(audit=audit, user=users["annotator"]).pk)
        review_decide(trajectory=claimed, reviewer=users["annotator"], decision="accept", expected_version=1)
    client = client_for("curator")
    refused = client.post(f"/audits/{audit.pk}/accept-rest/", {"max_error_rate": "1"}, follow=True).content.decode()
    assert "Not accepted" in refused and "above the ceiling 1.0%" in refused
    done = client.post(f"/audits/{audit.pk}/accept-rest/", {"max_error_rate": "99"}, follow=True).content.decode()
    assert "2 trajectories accepted on the evidence of audit" in done
    assert Trajectory.objects.filter(status=TrajectoryStatus.ACCEPTED).count() == 12
    assert re.search(r'id="accepted-count">2</strong>', done)
