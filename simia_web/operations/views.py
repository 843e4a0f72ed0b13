"""/metrics for Prometheus, and the admins' webhook pages: subscriptions, their delivery log, "send test"."""

import hmac
import ipaddress

from django.conf import settings
from django.contrib import messages
from django.http import HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST
from prometheus_client import CONTENT_TYPE_LATEST

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids, scoped
from simia_web.core.errors import ValidationFailed

from . import selectors, services
from .forms import WebhookSubscriptionForm
from .metrics import metrics_exposition
from .models import DeliveryStatus, WebhookDelivery

ADMIN = "admin"


def _metrics_refusal(request) -> HttpResponse | None:
    """None when the scraper may read /metrics: its address is in SIMIA_METRICS_ALLOWED_IPS, or it sends
    `Authorization: Bearer <SIMIA_METRICS_TOKEN>`. Else 401 (a token is configured and was not given right) or 403."""
    try:
        address = ipaddress.ip_address(request.META.get("REMOTE_ADDR", ""))
    except ValueError:  # served over a Unix socket: no address to allow
        address = None
    if address is not None and any(address in network for network in settings.SIMIA_METRICS_ALLOWED_IPS):
        return None
    token = settings.SIMIA_METRICS_TOKEN
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    if token and scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
        return None
    if token:
        response = HttpResponse("A bearer token is required.\n", status=401, content_type="text/plain")
        response["WWW-Authenticate"] = 'Bearer realm="metrics"'
        return response
    return HttpResponse("This address may not read the metrics.\n", status=403, content_type="text/plain")


@require_GET
def metrics(request):
    refusal = _metrics_refusal(request)
    if refusal is not None:
        return refusal
    response = HttpResponse(metrics_exposition(), content_type=CONTENT_TYPE_LATEST)
    response["Cache-Control"] = "no-store"
    return response


def _form_errors(form, exc: ValidationFailed) -> None:
    for field, errors in exc.errors.items():
        for error in errors:
            form.add_error(field if field in form.fields else None, error)


@role_required(ADMIN)
def webhook_list(request):
    form = WebhookSubscriptionForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            subscription = services.webhook_subscription_create(
                **form.cleaned_data, actor=request.user, workspace_id=request.user.current_workspace_id
            )
        except ValidationFailed as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, f"Webhook “{subscription.name}” created: its signing secret is on this page.")
            return redirect("webhook-detail", pk=subscription.pk)
    status = 400 if form.errors else 200
    return render(
        request,
        "operations/webhook_list.html",
        {"subscriptions": selectors.subscription_list(workspace_ids=page_workspace_ids(request.user)), "form": form},
        status=status,
    )


def _log_context(subscription, before: str | None) -> dict:
    deliveries = selectors.delivery_list(subscription)
    if before and before.isdigit():
        deliveries = deliveries.filter(pk__lt=int(before))
    shown = list(deliveries[: selectors.DELIVERIES_SHOWN + 1])
    return {
        "subscription": subscription,
        "deliveries": shown[: selectors.DELIVERIES_SHOWN],
        "older": shown[selectors.DELIVERIES_SHOWN - 1].pk if len(shown) > selectors.DELIVERIES_SHOWN else None,
        "polling": any(d.status == DeliveryStatus.PENDING for d in shown),
    }


@role_required(ADMIN)
def webhook_detail(request, pk: int):
    subscription = get_object_or_404(selectors.subscription_list(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    initial = {
        "name": subscription.name,
        "url": subscription.url,
        "events": subscription.events,
        "active": subscription.active,
    }
    form = WebhookSubscriptionForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            services.webhook_subscription_update(subscription=subscription, actor=request.user, **form.cleaned_data)
        except ValidationFailed as exc:
            _form_errors(form, exc)
        else:
            messages.success(request, "Saved.")
            return redirect("webhook-detail", pk=subscription.pk)
    context = {"form": form, "now": timezone.now(), **_log_context(subscription, request.GET.get("before"))}
    return render(request, "operations/webhook_detail.html", context, status=400 if form.errors else 200)


@role_required(ADMIN)
@require_GET
def webhook_deliveries(request, pk: int):
    """The delivery log alone: what htmx swaps in while deliveries are pending."""
    subscription = get_object_or_404(selectors.subscription_list(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    return render(request, "operations/_deliveries.html", _log_context(subscription, request.GET.get("before")))


@role_required(ADMIN)
@require_POST
def webhook_test(request, pk: int):
    subscription = get_object_or_404(selectors.subscription_list(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    services.webhook_test_send(subscription=subscription, actor=request.user)
    if request.htmx:
        return render(request, "operations/_deliveries.html", _log_context(subscription, None))
    messages.success(request, "A test event is on its way.")
    return redirect("webhook-detail", pk=subscription.pk)


@role_required(ADMIN)
@require_POST
def webhook_delivery_retry(request, pk: int):
    deliveries = WebhookDelivery.objects.select_related("subscription")
    delivery = get_object_or_404(scoped(deliveries, page_workspace_ids(request.user)), pk=pk)
    services.webhook_delivery_retry(delivery=delivery, actor=request.user)
    if request.htmx:
        return render(request, "operations/_deliveries.html", _log_context(delivery.subscription, None))
    return redirect("webhook-detail", pk=delivery.subscription_id)


@role_required(ADMIN)
@require_POST
def webhook_secret_rotate(request, pk: int):
    subscription = get_object_or_404(selectors.subscription_list(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    try:
        overlap = float(request.POST.get("overlap_hours", "24"))
        services.webhook_secret_rotate(subscription=subscription, actor=request.user, overlap_hours=overlap)
    except (ValueError, ValidationFailed):
        messages.error(request, f"Overlap: give a number of hours from 0 to {services.MAX_OVERLAP_HOURS}.")
    else:
        messages.success(request, "New signing secret: the old one signs deliveries too until the overlap ends.")
    return redirect("webhook-detail", pk=subscription.pk)


@role_required(ADMIN)
@require_POST
def webhook_delete(request, pk: int):
    subscription = get_object_or_404(selectors.subscription_list(workspace_ids=page_workspace_ids(request.user)), pk=pk)
    services.webhook_subscription_delete(subscription=subscription, actor=request.user)
    messages.success(request, f"Webhook “{subscription.name}” deleted.")
    return redirect("webhook-list")
