"""REST endpoints of webhooks, for admins: subscriptions, their delivery log, and a test event."""

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.permissions import IsAdmin
from simia_web.accounts.rest import WORKSPACE_PARAMETER, request_workspace_ids, workspace_write_field
from simia_web.accounts.scoping import role_require_in, workspace_for_write

from . import selectors, services
from .models import WebhookDelivery, WebhookEvent, WebhookSubscription


class WebhookSubscriptionSerializer(serializers.ModelSerializer):
    events = serializers.ListField(child=serializers.ChoiceField(choices=WebhookEvent.choices), allow_empty=False)
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    secret = serializers.CharField(
        read_only=True,
        help_text="Signs every delivery: Simia-Signature: t=<unix>,v1=<hex HMAC-SHA256 of '<t>.' + body>",
    )

    previous_secret_until = serializers.DateTimeField(
        read_only=True, help_text="Until then, the secret before the last rotation signs every delivery too."
    )
    workspace = workspace_write_field()

    class Meta:
        model = WebhookSubscription
        fields = ["id", "workspace", "name", "url", "events", "active", "secret", "previous_secret_until"]
        fields += ["created_by", "created_at", "updated_at"]
        read_only_fields = ["created_at", "updated_at"]


class SecretRotationSerializer(serializers.Serializer):
    overlap_hours = serializers.FloatField(
        default=24,
        min_value=0,
        max_value=services.MAX_OVERLAP_HOURS,
        help_text="How long the old secret keeps signing deliveries beside the new one.",
    )


class WebhookDeliverySerializer(serializers.ModelSerializer):
    class Meta:
        model = WebhookDelivery
        fields = [
            "id",
            "event",
            "payload",
            "status",
            "attempts",
            "response_code",
            "error",
            "duration_ms",
            "created_at",
            "last_attempt_at",
            "next_attempt_at",
        ]


class WebhookSubscriptionViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    mixins.UpdateModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet,
):
    """Webhook subscriptions (admins only). PUT takes name, url and events (and active); PATCH any of them."""

    permission_classes = [IsAdmin]
    serializer_class = WebhookSubscriptionSerializer

    def get_queryset(self):
        return selectors.subscription_list(workspace_ids=request_workspace_ids(self.request)).order_by("id")

    def get_object(self):
        """Another workspace's subscription is not found; one of the caller's needs the admin role there."""
        subscription = super().get_object()
        role_require_in(self.request.user, subscription.workspace_id, "admin")
        return subscription

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def perform_create(self, serializer):
        # A refused subscription is a ValidationFailed, answered as a 400 by core's exception handler.
        fields = {**serializer.validated_data}
        workspace = workspace_for_write(self.request.user, fields.pop("workspace", None), role="admin")
        serializer.instance = services.webhook_subscription_create(
            **fields, actor=self.request.user, workspace_id=workspace.pk
        )

    def perform_update(self, serializer):
        subscription = serializer.instance
        fields = {name: getattr(subscription, name) for name in ("name", "url", "events", "active")}
        changed = {name: value for name, value in serializer.validated_data.items() if name != "workspace"}
        serializer.instance = services.webhook_subscription_update(
            subscription=subscription, actor=self.request.user, **{**fields, **changed}
        )

    def perform_destroy(self, instance):
        services.webhook_subscription_delete(subscription=instance, actor=self.request.user)

    @extend_schema(request=None, responses={202: WebhookDeliverySerializer})
    @action(detail=True, methods=["post"])
    def test(self, request, pk=None):
        """Send a `ping` event to this subscription; its delivery is returned, and shows in the log."""
        delivery = services.webhook_test_send(subscription=self.get_object(), actor=request.user)
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(request=SecretRotationSerializer, responses={200: WebhookSubscriptionSerializer})
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request, pk=None):
        """A new signing secret; the old one also signs deliveries for `overlap_hours` (both v1 values are sent)."""
        rotation = SecretRotationSerializer(data=request.data)
        rotation.is_valid(raise_exception=True)
        subscription = services.webhook_secret_rotate(
            subscription=self.get_object(), actor=request.user, **rotation.validated_data
        )
        return Response(WebhookSubscriptionSerializer(subscription).data)

    @extend_schema(responses={200: WebhookDeliverySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def deliveries(self, request, pk=None):
        """The delivery log, newest first, cursor-paged."""
        page = self.paginate_queryset(selectors.delivery_list(self.get_object()))
        return self.get_paginated_response(WebhookDeliverySerializer(page, many=True).data)
