"""Read-only view of the configured LLM endpoints (API keys are never stored, so never shown)."""

from rest_framework import serializers, viewsets

from simia_web.accounts.api import ApiAutoSchema

from .models import EndpointProfile


class EndpointProfileSerializer(serializers.ModelSerializer):
    class Meta:
        model = EndpointProfile
        fields = [
            "id",
            "name",
            "base_url",
            "model",
            "temperature",
            "max_tokens",
            "timeout_seconds",
            "max_concurrency",
            "structured_mode",
            "tool_mode",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "cache_enabled",
            "is_default",
        ]


class EndpointProfileViewSet(viewsets.ReadOnlyModelViewSet):
    schema = ApiAutoSchema()
    serializer_class = EndpointProfileSerializer
    queryset = EndpointProfile.objects.all()
