"""GET /api/v1/audit-log/: the audit log, filtered and cursor-paged (admins; site administrators read all)."""

from datetime import UTC

import django_filters
from rest_framework import serializers
from rest_framework.generics import ListAPIView

from simia_web.accounts.permissions import IsAdmin
from simia_web.core.filters import BoundedFilterSet
from simia_web.core.models import AuditEvent

from . import selectors


class AuditEventSerializer(serializers.ModelSerializer):
    actor: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True, allow_null=True
    )
    workspace: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="slug", read_only=True, allow_null=True
    )
    changes = serializers.SerializerMethodField(help_text="[field, before, after] for edits and settings.")

    class Meta:
        model = AuditEvent
        fields = ["id", "created_at", "actor", "action", "target_type", "target_id", "workspace", "data", "changes"]

    def get_changes(self, event) -> list[list]:
        return [list(change) for change in selectors.audit_changes(event.data)]


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    """An ISO 8601 instant compared in UTC: PostgreSQL refuses offsets beyond ±15:59, which ISO 8601 allows."""

    def filter(self, qs, value):
        return super().filter(qs, value.astimezone(UTC) if value else value)


class AuditEventFilter(BoundedFilterSet):
    actor = django_filters.CharFilter(field_name="actor__username", help_text="A username.")
    action = django_filters.CharFilter(method="_action", help_text='An action, or a prefix ending in "."')
    target_type = django_filters.CharFilter(help_text='The object\'s type, e.g. "accounts.user".')
    target_id = django_filters.CharFilter(help_text="The object's id (with target_type).")
    workspace = django_filters.CharFilter(field_name="workspace__slug", help_text="A workspace slug.")
    since = UtcDateTimeFilter(field_name="created_at", lookup_expr="gte")
    until = UtcDateTimeFilter(field_name="created_at", lookup_expr="lt")

    class Meta:
        model = AuditEvent
        fields: list[str] = []

    def _action(self, queryset, name, value):
        return queryset.filter(action__startswith=value) if value.endswith(".") else queryset.filter(action=value)


class AuditLogApi(ListAPIView):
    permission_classes = [IsAdmin]
    serializer_class = AuditEventSerializer
    filterset_class = AuditEventFilter

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # the schema generator asks with nobody signed in
            return AuditEvent.objects.none()
        return selectors.audit_events_visible(user=self.request.user).select_related("actor", "workspace")
