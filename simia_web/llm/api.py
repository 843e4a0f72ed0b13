"""Read-only view of the configured LLM endpoints, for admins (API keys are never stored, so never shown;
credentials someone put in a base URL are masked)."""

from rest_framework import serializers, viewsets

from simia_web.accounts.permissions import IsAdmin

from .models import EndpointProfile
from .validation import url_redacted


class EndpointProfileSerializer(serializers.ModelSerializer):
    base_url = serializers.SerializerMethodField(help_text="The endpoint's base URL, credentials masked.")

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

    def get_base_url(self, profile) -> str:
        return url_redacted(profile.base_url)


class EndpointProfileViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = EndpointProfileSerializer
    queryset = EndpointProfile.objects.all()
    permission_classes = [IsAdmin]
