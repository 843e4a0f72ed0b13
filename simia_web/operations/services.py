"""Webhooks: subscriptions, events, signed deliveries retried with backoff, and review milestones.

An event becomes one delivery row per active subscription that asked for it, written in the transaction of
the change it announces; its message goes to the broker after that commit, and a worker POSTs it. A delivery
is made at least once: a receiver tells repeats apart by the event's `id`.
"""

import functools
import logging
import random
import time
import uuid
from datetime import timedelta
from urllib.parse import urlsplit, urlunsplit

import httpx2
import orjson
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, Q
from django.utils import timezone

from simia_web.accounts.models import owner_workspace_id
from simia_web.core.dispatch import task_send
from simia_web.core.errors import ValidationFailed
from simia_web.core.outages import through_outages
from simia_web.core.services import audit_record
from simia_web.curation.models import Trajectory, TrajectoryStatus
from simia_web.llm.validation import host_addresses, url_address_problem

from .counters import webhook_attempt_count
from .models import (
    PING,
    DeliveryStatus,
    ReviewMilestone,
    WebhookDelivery,
    WebhookEvent,
    WebhookSubscription,
    webhook_secret,
)
from .signing import SIGNATURE_HEADER, signature_header

logger = logging.getLogger(__name__)

REVIEWED = (TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED)
# What the log keeps of a receiver's answer or of an error.
ERROR_KEPT = 500
# An error that starts so is the URL's own: trying again cannot help.
REFUSED = "refused:"
WEBHOOK_DELIVER = "simia_web.operations.tasks.webhook_deliver"  # by name: that module imports this one
MAX_OVERLAP_HOURS = 24 * 30
SWEEP_BATCH = 500  # deliveries sent again per look; the rest at the next


def webhook_subscription_validate(*, url: str, events: list) -> None:
    """Raise a ValidationFailed naming the field when a subscription may not send to `url` or names unknown events."""
    errors = {}
    host = urlsplit(url or "").hostname or ""
    if address := url_address_problem(url or ""):
        errors["url"] = f"must not point at {address} (SIMIA_ALLOW_LINK_LOCAL_ENDPOINTS allows it)"
    elif host and not host_addresses(host):
        errors["url"] = f"{host} does not resolve to an address here: check the host name"
    unknown = sorted(set(events) - set(WebhookEvent.values))
    if not events or unknown:
        errors["events"] = f"choose from {', '.join(WebhookEvent.values)}" + (
            f" (unknown: {', '.join(map(str, unknown))})" if unknown else ""
        )
    if errors:
        raise ValidationFailed.of(errors)


def webhook_subscription_create(
    *, name: str, url: str, events: list, active: bool = True, actor, workspace_id: int | None = None
) -> WebhookSubscription:
    """A subscription to the events of one workspace (the `default` one when None)."""
    webhook_subscription_validate(url=url, events=events)
    owner = {} if workspace_id is None else {"workspace_id": workspace_id}
    with transaction.atomic():
        subscription = WebhookSubscription.objects.create(
            name=name, url=url, events=sorted(set(events)), active=active, created_by=actor, **owner
        )
        audit_record(actor=actor, action="webhook.create", target=subscription, data={"url": url, "events": events})
    return subscription


def webhook_subscription_update(
    *, subscription: WebhookSubscription, actor, name: str, url: str, events: list, active: bool
) -> WebhookSubscription:
    webhook_subscription_validate(url=url, events=events)
    with transaction.atomic():
        subscription.name, subscription.url, subscription.active = name, url, active
        subscription.events = sorted(set(events))
        subscription.save(update_fields=["name", "url", "events", "active", "updated_at"])
        audit_record(
            actor=actor,
            action="webhook.update",
            target=subscription,
            data={"url": url, "events": subscription.events, "active": active},
        )
    return subscription


def webhook_subscription_delete(*, subscription: WebhookSubscription, actor) -> None:
    with transaction.atomic():
        audit_record(actor=actor, action="webhook.delete", target=subscription, data={"url": subscription.url})
        subscription.delete()


def _envelope(event: str, data: dict) -> dict:
    return {"id": str(uuid.uuid4()), "type": event, "created": timezone.now().isoformat(), "data": data}


def _deliveries_send(deliveries: list[WebhookDelivery]) -> None:
    for delivery in deliveries:
        # With the broker away the delivery stays pending in the log: the watchdog sends it again (see the sweep).
        transaction.on_commit(functools.partial(task_send, WEBHOOK_DELIVER, (delivery.pk, 1)), robust=True)


def webhook_event_emit(*, event: str, data: dict, workspace_id: int) -> list[WebhookDelivery]:
    """Queue `event`, which happened in the workspace `workspace_id`, for every active subscription of that
    workspace that asked for it, sent after the current transaction commits.

    The subscriptions are few (a team's list): they are read whole and matched here, the same way on PostgreSQL and
    SQLite.
    """
    active = WebhookSubscription.objects.filter(active=True, workspace_id=workspace_id)
    subscriptions = [s for s in active if event in s.events]
    if not subscriptions:
        return []
    payload = _envelope(event, data)
    deliveries = WebhookDelivery.objects.bulk_create(
        WebhookDelivery(subscription=subscription, event=event, payload=payload) for subscription in subscriptions
    )
    _deliveries_send(deliveries)
    return deliveries


def webhook_test_send(*, subscription: WebhookSubscription, actor) -> WebhookDelivery:
    """A `ping` event to this subscription alone, whatever its events and even when inactive."""
    with transaction.atomic():
        data = {"subscription": subscription.pk, "sent_by": actor.username}
        delivery = WebhookDelivery.objects.create(subscription=subscription, event=PING, payload=_envelope(PING, data))
        _deliveries_send([delivery])
    return delivery


def webhook_delivery_retry(*, delivery: WebhookDelivery, actor) -> WebhookDelivery:
    """Send a delivery again from its first attempt (one that failed, or whose message an outage lost)."""
    with transaction.atomic():
        locked = WebhookDelivery.objects.select_for_update().get(pk=delivery.pk)
        locked.status, locked.attempts, locked.next_attempt_at = DeliveryStatus.PENDING, 0, None
        locked.save(update_fields=["status", "attempts", "next_attempt_at"])
        audit_record(actor=actor, action="webhook.retry", target=locked.subscription, data={"delivery": locked.pk})
        _deliveries_send([locked])
    return locked


def _backoff_seconds(attempt: int) -> float:
    """Exponential from SIMIA_WEBHOOK_BACKOFF_SECONDS, with jitter, at most SIMIA_WEBHOOK_BACKOFF_MAX_SECONDS."""
    delay = settings.SIMIA_WEBHOOK_BACKOFF_SECONDS * 2 ** (attempt - 1)
    return min(settings.SIMIA_WEBHOOK_BACKOFF_MAX_SECONDS, delay) * (0.75 + random.random() / 4)


def _claim(delivery_id: int, attempt: int) -> WebhookDelivery | None:
    """Take attempt number `attempt` of a pending delivery, once: a second message for it finds it taken."""
    claimed = WebhookDelivery.objects.filter(pk=delivery_id, status=DeliveryStatus.PENDING, attempts=attempt - 1)
    if not claimed.update(attempts=attempt, last_attempt_at=timezone.now()):
        return None
    return WebhookDelivery.objects.select_related("subscription").get(pk=delivery_id)


def _pinned(url: str) -> tuple[str, dict, str]:
    """The URL with its host name resolved once and every address it resolves to checked (the name may point
    elsewhere now than when the subscription was saved): (URL to the checked address, request extensions that keep
    the name for TLS, refusal or ""). The request is sent to that address, with the name in its Host header and SNI, so
    a second lookup cannot lead the connection somewhere unchecked."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    addresses = host_addresses(host)
    if not addresses:
        return url, {}, f"{REFUSED} {host} does not resolve to an address"
    if problem := url_address_problem(url, addresses):
        return url, {}, f"{REFUSED} must not point at {problem}"
    address = sorted(addresses, key=lambda a: (a.version, str(a)))[0]  # IPv4 first, as most receivers listen
    netloc = f"[{address}]" if address.version == 6 else str(address)
    if parts.port:
        netloc += f":{parts.port}"
    pinned = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
    return pinned, {"sni_hostname": host} if parts.scheme == "https" else {}, ""


def _post(delivery: WebhookDelivery) -> tuple[int | None, str]:
    """POST the signed payload to the address checked for it; (status code or None, error or "")."""
    subscription = delivery.subscription
    target, extensions, refusal = _pinned(subscription.url)
    if refusal:
        return None, refusal
    body = orjson.dumps(delivery.payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "Simia-Webhooks/1",
        "Host": urlsplit(subscription.url).netloc.rpartition("@")[2],
        "Simia-Event": delivery.event,
        "Simia-Delivery": str(delivery.pk),
        SIGNATURE_HEADER: signature_header(subscription.secret, body, int(time.time()), *_overlapping(subscription)),
    }
    try:
        with (
            httpx2.Client(timeout=settings.SIMIA_WEBHOOK_TIMEOUT_SECONDS, follow_redirects=False) as client,
            client.stream("POST", target, content=body, headers=headers, extensions=extensions) as response,
        ):
            if 200 <= response.status_code < 300:
                return response.status_code, ""
            return response.status_code, f"HTTP {response.status_code}: {_answer_head(response)}"
    except httpx2.HTTPError as exc:
        return None, f"{type(exc).__name__}: {exc}"[:ERROR_KEPT]


def _overlapping(subscription: WebhookSubscription) -> list[str]:
    """The secret a rotation replaced, while its overlap lasts."""
    until = subscription.previous_secret_until
    return [subscription.previous_secret] if subscription.previous_secret and until and until > timezone.now() else []


def webhook_secret_rotate(*, subscription: WebhookSubscription, actor, overlap_hours: float) -> WebhookSubscription:
    """Give the subscription a new secret; the old one signs every delivery too for `overlap_hours` (0: not at all),
    so the receiver can switch without refusing a delivery."""
    if not 0 <= overlap_hours <= MAX_OVERLAP_HOURS:
        raise ValidationFailed(f"must be between 0 and {MAX_OVERLAP_HOURS}", field="overlap_hours")
    with transaction.atomic():
        locked = WebhookSubscription.objects.select_for_update().get(pk=subscription.pk)
        locked.previous_secret, locked.secret = locked.secret, webhook_secret()
        locked.previous_secret_until = timezone.now() + timedelta(hours=overlap_hours)
        locked.save(update_fields=["secret", "previous_secret", "previous_secret_until", "updated_at"])
        data = {"overlap_until": locked.previous_secret_until.isoformat()}
        audit_record(actor=actor, action="webhook.rotate_secret", target=locked, data=data)
    return locked


def webhook_deliveries_sweep(*, now=None) -> int:
    """Send again the deliveries whose message a broker outage lost (the watchdog's look, as for job units); returns
    how many. A pending delivery is stuck when its first attempt, its next attempt, or the recording of an attempt
    in flight is overdue by SIMIA_WEBHOOK_SWEEP_SECONDS. A message that was only late finds its attempt taken."""
    now = now or timezone.now()
    overdue = now - timedelta(seconds=settings.SIMIA_WEBHOOK_SWEEP_SECONDS)
    in_flight_overdue = overdue - timedelta(seconds=settings.SIMIA_WEBHOOK_TIMEOUT_SECONDS)
    stuck = WebhookDelivery.objects.filter(status=DeliveryStatus.PENDING).filter(
        Q(attempts=0, created_at__lt=overdue)
        | Q(attempts__gt=0, next_attempt_at__lt=overdue)
        | Q(attempts__gt=0, next_attempt_at__isnull=True, last_attempt_at__lt=in_flight_overdue)
    )
    sent = 0
    for delivery_id, attempts in stuck.order_by("id").values_list("id", "attempts")[:SWEEP_BATCH]:
        task_send(WEBHOOK_DELIVER, (delivery_id, attempts + 1))
        sent += 1
    if sent:
        logger.warning("watchdog: sent %d webhook deliveries again, their messages lost", sent)
    return sent


def _answer_head(response) -> str:
    """The start of a refusal's body, for the log: the rest is never read, however large it is."""
    head = b""
    for chunk in response.iter_bytes():
        head += chunk
        if len(head) >= ERROR_KEPT:
            break
    return head[:ERROR_KEPT].decode("utf-8", "replace")


def webhook_delivery_attempt(*, delivery_id: int, attempt: int) -> None:
    """Make attempt number `attempt` of a delivery and record it; on failure, schedule the next one with backoff
    until SIMIA_WEBHOOK_MAX_ATTEMPTS, then mark it failed. Any 2xx answer delivers it; redirects are not followed.

    Database outages before and after the request are waited out, so an attempt made is always recorded."""
    what = f"webhook delivery {delivery_id}"
    delivery = through_outages(lambda: _claim(delivery_id, attempt), what=what)
    if delivery is None:
        return
    started = time.monotonic()
    code, error = _post(delivery)
    delivery.response_code, delivery.error = code, error
    delivery.duration_ms = round((time.monotonic() - started) * 1000)
    through_outages(lambda: _attempt_record(delivery, attempt), what=what)


def _attempt_record(delivery: WebhookDelivery, attempt: int) -> None:
    error = delivery.error
    retry = bool(error) and not error.startswith(REFUSED) and attempt < settings.SIMIA_WEBHOOK_MAX_ATTEMPTS
    delay = _backoff_seconds(attempt) if retry else 0.0
    if not error:
        delivery.status, delivery.next_attempt_at, outcome = DeliveryStatus.DELIVERED, None, "delivered"
    elif retry:
        delivery.next_attempt_at, outcome = timezone.now() + timedelta(seconds=delay), "retried"
    else:
        delivery.status, delivery.next_attempt_at, outcome = DeliveryStatus.FAILED, None, "failed"
    with transaction.atomic():
        delivery.save(update_fields=["status", "response_code", "error", "duration_ms", "next_attempt_at"])
        webhook_attempt_count(event=delivery.event, outcome=outcome)
        if retry:
            args = (delivery.pk, attempt + 1)
            transaction.on_commit(lambda: task_send(WEBHOOK_DELIVER, args, countdown=delay), robust=True)


# -- review milestones ---------------------------------------------------------------------------------


def review_milestones_check(*, job_id: int) -> list[int]:
    """Announce each share of SIMIA_WEBHOOK_REVIEW_MILESTONES (percent) of the job's trajectories that is now
    reviewed (accepted or rejected) and was not announced before; returns the shares announced.

    A share is announced once per job: undoing decisions below it and deciding again does not repeat it. One
    count over the job's trajectories (the job-and-status index), made only when someone subscribed.
    """
    counts = Trajectory.objects.filter(job_id=job_id).aggregate(
        total=Count("id"),
        accepted=Count("id", filter=Q(status=TrajectoryStatus.ACCEPTED)),
        rejected=Count("id", filter=Q(status=TrajectoryStatus.REJECTED)),
    )
    total, reviewed = counts["total"], counts["accepted"] + counts["rejected"]
    if not total:
        return []
    reached = [p for p in settings.SIMIA_WEBHOOK_REVIEW_MILESTONES if reviewed * 100 >= p * total]
    announced = set(ReviewMilestone.objects.filter(job_id=job_id).values_list("percent", flat=True))
    new = []
    for percent in reached:
        if percent in announced:
            continue
        try:
            with transaction.atomic():
                milestone = ReviewMilestone.objects.create(job_id=job_id, percent=percent)
                webhook_event_emit(
                    event=WebhookEvent.REVIEW_MILESTONE,
                    data={"job": job_id, "percent": percent, "reviewed": reviewed, **counts},
                    workspace_id=owner_workspace_id(milestone.job),
                )
        except IntegrityError:  # another check announced it first
            continue
        new.append(percent)
    return new
