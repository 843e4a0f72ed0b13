"""Webhooks: signed deliveries to a receiver on loopback, retried after a 500 with backoff, logged; events for ended
jobs, ready snapshots and review milestones; "send test"; subscriptions managed by admins only."""

import hashlib
import hmac
import json
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from simia_web.curation.models import Trajectory
from simia_web.curation.services import review_decide, review_undo, reviews_bulk
from simia_web.exports.services import snapshot_create
from simia_web.jobs.models import JobStatus
from simia_web.jobs.services import job_cancel
from simia_web.operations.models import DeliveryStatus, WebhookDelivery, WebhookSubscription
from simia_web.operations.services import webhook_subscription_create, webhook_test_send
from simia_web.synthesis.services import synthesis_queue
from tests.conftest import wait_for
from tests.support.factories import make_job, make_trajectory, verdict
from tests.support.webhook_receiver import WebhookReceiver

TOLERANCE_SECONDS = 300


def signatures(received) -> tuple[int, list[str]]:
    """The header's timestamp and its v1 values, in order (two while a rotated secret's overlap lasts)."""
    fields = [part.split("=", 1) for part in received.headers["Simia-Signature"].split(",")]
    return int(dict(fields)["t"]), [value for name, value in fields if name == "v1"]


def verified(secret: str, received) -> dict:
    """Check a delivery's signature as a receiver would (see docs/operations.md): any v1 may match. Return the body."""
    timestamp, v1s = signatures(received)
    expected = hmac.new(secret.encode(), f"{timestamp}.".encode() + received.body, hashlib.sha256).hexdigest()
    assert any(hmac.compare_digest(expected, v1) for v1 in v1s), "signature does not match"
    assert abs(time.time() - timestamp) <= TOLERANCE_SECONDS
    return json.loads(received.body)


@pytest.fixture
def receiver():
    server = WebhookReceiver().start()
    yield server
    server.stop()


@pytest.fixture
def eager_hooks(eager, settings, tmp_path):
    settings.SIMIA_WEBHOOK_BACKOFF_SECONDS = 0.01
    settings.EXPORTS_DIR = tmp_path / "exports"


def subscribe(users, receiver, *events) -> WebhookSubscription:
    return webhook_subscription_create(name="ops", url=receiver.url, events=list(events), actor=users["admin"])


@pytest.mark.integration
def test_job_finished_is_signed_retried_after_a_500_and_logged(
    client, celery_worker, llm_stub, receiver, users, settings
):
    if not settings.CELERY_BROKER_URL.startswith("redis://"):
        pytest.skip("set CELERY_BROKER_URL to Redis (make test does)")
    receiver.statuses = [500]  # the first attempt fails; the next is answered 200
    subscription = subscribe(users, receiver, "job.finished", "job.failed")
    celery_worker(SIMIA_WEBHOOK_BACKOFF_SECONDS="0.5")
    job = synthesis_queue(domains=["shop"], apis=2, tasks=1, rollouts=1)
    delivery = wait_for(
        lambda: WebhookDelivery.objects.filter(subscription=subscription, status=DeliveryStatus.DELIVERED).first(),
        timeout=120,
        message="the delivery to succeed",
    )
    job.refresh_from_db()
    assert job.status == JobStatus.SUCCEEDED

    first, second = receiver.received
    assert (first.status, second.status) == (500, 200)
    bodies = [verified(subscription.secret, attempt) for attempt in (first, second)]
    assert bodies[0] == bodies[1]  # the same event, signed afresh for each attempt
    event = bodies[0]
    assert event["type"] == "job.finished" and first.headers["Simia-Event"] == "job.finished"
    assert event["data"]["job"]["id"] == job.pk and event["data"]["job"]["status"] == "succeeded"
    assert first.headers["Simia-Delivery"] == str(delivery.pk)

    assert (delivery.attempts, delivery.response_code, delivery.error) == (2, 200, "")
    assert delivery.duration_ms is not None and delivery.next_attempt_at is None
    client.force_login(users["admin"])
    page = client.get(f"/webhooks/{subscription.pk}/").content.decode()
    assert f'id="delivery-{delivery.pk}"' in page and "delivered" in page


def test_every_attempt_failing_ends_failed_with_the_last_answer(eager_hooks, receiver, users, settings):
    settings.SIMIA_WEBHOOK_MAX_ATTEMPTS = 3
    receiver.statuses = [500, 502, 503]
    subscription = subscribe(users, receiver, "job.cancelled")
    job_cancel(job=make_job(status=JobStatus.RUNNING), actor=users["curator"])
    delivery = WebhookDelivery.objects.get(subscription=subscription)
    assert delivery.status == DeliveryStatus.FAILED
    assert (delivery.attempts, delivery.response_code) == (3, 503)
    assert delivery.error.startswith("HTTP 503: down for maintenance")
    assert [r.status for r in receiver.received] == [500, 502, 503]


def test_send_test_button_delivers_a_signed_ping(client, eager_hooks, receiver, users):
    subscription = subscribe(users, receiver, "snapshot.ready")
    client.force_login(users["admin"])
    response = client.post(f"/webhooks/{subscription.pk}/test/", HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    delivery = WebhookDelivery.objects.get(subscription=subscription)
    assert f'id="delivery-{delivery.pk}"' in response.content.decode()  # the log, swapped in by htmx
    assert delivery.status == DeliveryStatus.DELIVERED
    (ping,) = receiver.received
    body = verified(subscription.secret, ping)
    assert body["type"] == "ping" and body["data"]["sent_by"] == "admin"


def test_a_failed_delivery_can_be_sent_again(client, eager_hooks, receiver, users, settings):
    settings.SIMIA_WEBHOOK_MAX_ATTEMPTS = 1
    receiver.statuses = [500]
    subscription = subscribe(users, receiver, "job.cancelled")
    client.force_login(users["admin"])
    client.post(f"/webhooks/{subscription.pk}/test/")
    delivery = WebhookDelivery.objects.get(subscription=subscription)
    assert delivery.status == DeliveryStatus.FAILED
    client.post(f"/webhooks/deliveries/{delivery.pk}/retry/", HTTP_HX_REQUEST="true")
    delivery.refresh_from_db()
    assert (delivery.status, delivery.attempts, delivery.response_code) == (DeliveryStatus.DELIVERED, 1, 200)


def test_snapshot_ready_and_job_events_go_to_their_subscribers_only(eager_hooks, receiver, users):
    make_trajectory(judge=verdict())
    snapshots = subscribe(users, receiver, "snapshot.ready")
    paused = subscribe(users, receiver, "snapshot.ready", "job.finished")
    WebhookSubscription.objects.filter(pk=paused.pk).update(active=False)
    snapshot = snapshot_create(format="openai", filters={"status": "all"}, actor=users["curator"])
    snapshot.refresh_from_db()
    assert snapshot.is_built
    (received,) = receiver.received
    event = verified(snapshots.secret, received)
    assert event["type"] == "snapshot.ready"
    assert event["data"]["snapshot"]["id"] == snapshot.pk
    assert event["data"]["snapshot"]["count"] == 1 and event["data"]["snapshot"]["sha256"] == snapshot.sha256
    assert event["data"]["snapshot"]["download"] == f"/api/v1/snapshots/{snapshot.pk}/download/"


def test_review_milestones_are_announced_once_each(eager_hooks, receiver, users):
    job = make_job(status=JobStatus.SUCCEEDED)
    trajectories = [make_trajectory(judge=verdict(), job=job) for _ in range(4)]
    make_trajectory(judge=verdict())  # another job's (none): not counted
    subscription = subscribe(users, receiver, "review.milestone")
    annotator = users["annotator"]

    review = review_decide(trajectory=trajectories[0], reviewer=annotator, decision="accept", expected_version=1)
    review_decide(trajectory=trajectories[1], reviewer=annotator, decision="reject", expected_version=1, reason="no")
    review_undo(review=review, actor=annotator)  # back to 25%: nothing announced again when it is reached again
    trajectories[0].refresh_from_db()
    review_decide(
        trajectory=trajectories[0], reviewer=annotator, decision="accept", expected_version=trajectories[0].version
    )
    reviews_bulk(
        trajectories=Trajectory.objects.filter(job=job, status="judged_pass"),
        reviewer=users["curator"],
        decision="accept",
    )
    events = [verified(subscription.secret, r) for r in receiver.received]
    assert [e["data"]["percent"] for e in events] == [25, 50, 75, 100]
    assert {e["type"] for e in events} == {"review.milestone"}
    assert events[-1]["data"] == {
        "job": job.pk,
        "percent": 100,
        "reviewed": 4,
        "total": 4,
        "accepted": 3,
        "rejected": 1,
    }


def test_no_milestone_work_without_a_subscriber(eager_hooks, users):
    job = make_job(status=JobStatus.SUCCEEDED)
    trajectory = make_trajectory(judge=verdict(), job=job)
    review_decide(trajectory=trajectory, reviewer=users["annotator"], decision="accept", expected_version=1)
    assert not WebhookDelivery.objects.exists()


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://metadata.google.internal/", "http://[fe80::1]/hook"]
)
def test_link_local_and_metadata_urls_are_refused(client, users, url):
    client.force_login(users["admin"])
    response = client.post("/webhooks/", {"name": "x", "url": url, "events": ["job.failed"], "active": "on"})
    assert response.status_code == 400
    assert (
        "link-local or cloud metadata" in response.content.decode() or "metadata service" in response.content.decode()
    )
    api = client.post(
        "/api/v1/webhooks/", {"name": "x", "url": url, "events": ["job.failed"]}, content_type="application/json"
    )
    assert api.status_code == 400 and "url" in api.json()
    assert not WebhookSubscription.objects.exists()


def test_admins_manage_subscriptions_over_rest(client, users, receiver):
    client.force_login(users["admin"])
    created = client.post(
        "/api/v1/webhooks/",
        {"name": "ci", "url": receiver.url, "events": ["job.failed"]},
        content_type="application/json",
    )
    assert created.status_code == 201, created.content
    body = created.json()
    assert body["secret"].startswith("whsec_") and body["events"] == ["job.failed"] and body["active"] is True
    patched = client.patch(f"/api/v1/webhooks/{body['id']}/", {"active": False}, content_type="application/json")
    assert patched.status_code == 200 and patched.json()["active"] is False
    unknown = client.patch(
        f"/api/v1/webhooks/{body['id']}/", {"events": ["job.exploded"]}, content_type="application/json"
    )
    assert unknown.status_code == 400
    assert client.get(f"/api/v1/webhooks/{body['id']}/deliveries/").json()["results"] == []
    for role in ("annotator", "curator"):
        client.force_login(users[role])
        assert client.get("/api/v1/webhooks/").status_code == 403
        assert client.get("/webhooks/").status_code == 403
    client.force_login(users["admin"])
    assert client.delete(f"/api/v1/webhooks/{body['id']}/").status_code == 204
    assert not WebhookSubscription.objects.exists()


def test_a_rotated_secret_signs_beside_the_new_one_until_its_overlap_ends(client, users, receiver, eager_hooks):
    subscription = subscribe(users, receiver, "job.failed")
    old_secret = subscription.secret
    client.force_login(users["admin"])
    rotated = client.post(
        f"/api/v1/webhooks/{subscription.pk}/rotate-secret/", {"overlap_hours": 1}, content_type="application/json"
    )
    assert rotated.status_code == 200, rotated.content
    new_secret = rotated.json()["secret"]
    assert new_secret != old_secret and rotated.json()["previous_secret_until"]
    assert client.post(f"/api/v1/webhooks/{subscription.pk}/test/").status_code == 202
    during = receiver.received[-1]
    assert len(signatures(during)[1]) == 2
    assert verified(new_secret, during) == verified(old_secret, during)
    WebhookSubscription.objects.filter(pk=subscription.pk).update(previous_secret_until=timezone.now())
    client.post(f"/api/v1/webhooks/{subscription.pk}/test/")
    after = receiver.received[-1]
    assert len(signatures(after)[1]) == 1
    verified(new_secret, after)
    with pytest.raises(AssertionError, match="does not match"):
        verified(old_secret, after)
    refused = client.post(
        f"/api/v1/webhooks/{subscription.pk}/rotate-secret/", {"overlap_hours": -1}, content_type="application/json"
    )
    assert refused.status_code == 400 and "overlap_hours" in refused.json()
    client.force_login(users["curator"])
    assert client.post(f"/api/v1/webhooks/{subscription.pk}/rotate-secret/").status_code == 403


def test_the_rotate_button_on_the_page_keeps_the_old_secret_for_the_overlap(client, users, receiver):
    subscription = subscribe(users, receiver, "job.failed")
    client.force_login(users["admin"])
    page = client.post(f"/webhooks/{subscription.pk}/rotate-secret/", {"overlap_hours": "48"}, follow=True)
    subscription.refresh_from_db()
    assert page.status_code == 200 and subscription.previous_secret
    assert 'id="webhook-overlap"' in page.content.decode()
    bad = client.post(f"/webhooks/{subscription.pk}/rotate-secret/", {"overlap_hours": "forever"}, follow=True)
    assert "Overlap: give a number of hours" in bad.content.decode()


def test_deliveries_a_broker_outage_lost_are_swept_by_the_watchdog_and_delivered(users, receiver, eager_hooks):
    from simia_web.jobs.services import jobs_heal

    subscription = subscribe(users, receiver, "job.failed")
    long_ago = timezone.now() - timedelta(minutes=10)

    def delivery(**fields):
        made = WebhookDelivery.objects.create(subscription=subscription, event="ping", payload={"id": "x"})
        WebhookDelivery.objects.filter(pk=made.pk).update(**fields)
        return made

    never_sent = delivery(created_at=long_ago)
    retry_lost = delivery(created_at=long_ago, attempts=1, next_attempt_at=long_ago, last_attempt_at=long_ago)
    in_flight_lost = delivery(created_at=long_ago, attempts=2, last_attempt_at=long_ago)
    just_queued = delivery()
    jobs_heal()  # the watchdog's look: its turn is free
    for swept, attempts in ((never_sent, 1), (retry_lost, 2), (in_flight_lost, 3)):
        swept.refresh_from_db()
        assert (swept.status, swept.attempts) == (DeliveryStatus.DELIVERED, attempts)
    just_queued.refresh_from_db()
    assert (just_queued.status, just_queued.attempts) == (DeliveryStatus.PENDING, 0)
    assert len(receiver.received) == 3


def test_a_refusal_reads_as_one_sentence_and_a_name_that_does_not_resolve_is_refused(client, users):
    client.force_login(users["admin"])
    refused = client.post(
        "/api/v1/webhooks/",
        {"name": "x", "url": "http://169.254.169.254/hook", "events": ["job.failed"]},
        content_type="application/json",
    )
    assert refused.json()["url"] == [
        "must not point at 169.254.169.254, a link-local or cloud metadata address "
        "(SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS allows it)"
    ]
    unresolved = client.post(
        "/api/v1/webhooks/",
        {"name": "x", "url": "http://no-such-host.invalid/hook", "events": ["job.failed"]},
        content_type="application/json",
    )
    assert unresolved.status_code == 400
    assert unresolved.json()["url"] == ["no-such-host.invalid does not resolve to an address here: check the host name"]


@pytest.fixture
def resolver(monkeypatch):
    """Names resolved as the test says ({name: address}); other names as usual."""
    import socket

    names: dict[str, str] = {}
    real = socket.getaddrinfo

    def getaddrinfo(host, *args, **kwargs):
        if host in names:
            return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (names[host], 0))]
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return names


def test_a_delivery_goes_to_the_address_checked_for_it_with_the_name_in_its_host_header(
    users, receiver, eager_hooks, resolver
):
    resolver["hooks.example.test"] = "127.0.0.1"
    port = receiver.url.split(":")[2].split("/")[0]
    subscription = webhook_subscription_create(
        name="ops", url=f"http://hooks.example.test:{port}/hooks/simia", events=["job.failed"], actor=users["admin"]
    )
    webhook_test_send(subscription=subscription, actor=users["admin"])
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.DELIVERED, delivery.error
    assert receiver.received[-1].headers["Host"] == f"hooks.example.test:{port}"


def test_a_name_that_resolves_to_a_metadata_address_at_send_time_is_refused_then(
    users, receiver, eager_hooks, resolver
):
    resolver["hooks.example.test"] = "127.0.0.1"  # checked and saved while it pointed at the receiver
    subscription = webhook_subscription_create(
        name="ops", url="http://hooks.example.test/hook", events=["job.failed"], actor=users["admin"]
    )
    resolver["hooks.example.test"] = "169.254.169.254"  # then the name moved
    webhook_test_send(subscription=subscription, actor=users["admin"])
    delivery = WebhookDelivery.objects.get()
    assert delivery.status == DeliveryStatus.FAILED and delivery.attempts == 1
    assert delivery.error == (
        "refused: must not point at hooks.example.test, which resolves to a link-local or cloud metadata address "
        "(169.254.169.254)"
    )
    assert receiver.received == []
