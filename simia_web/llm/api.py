"""Read-only view of the configured LLM endpoints, for admins (API keys are never stored, so never shown;
credentials someone put in a base URL are masked), and their probe."""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.permissions import IsAdmin

from .models import EndpointProfile
from .tasks import endpoint_check_run
from .validation import url_redacted


class EndpointProfileSerializer(serializers.ModelSerializer):
    base_url = serializers.SerializerMethodField(help_text="The endpoint's base URL, credentials masked.")
    capabilities = serializers.SerializerMethodField(help_text="What the probe found and what was learned in use.")

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
            "requests_per_minute",
            "tokens_per_minute",
            "structured_mode",
            "tool_mode",
            "stage_max_tokens",
            "context_window",
            "chars_per_token",
            "tokens_per_second",
            "capabilities",
            "follows_environment",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "cache_enabled",
            "is_default",
        ]

    def get_base_url(self, profile) -> str:
        return url_redacted(profile.base_url)

    def get_capabilities(self, profile) -> dict:
        found = dict(profile.capabilities or {})
        if isinstance(found.get("endpoint"), str):  # "<base URL> <model>", as rows older than its masking hold it
            url, _, model = found["endpoint"].rpartition(" ")
            found["endpoint"] = f"{url_redacted(url)} {model}"
        return found


class EndpointProfileViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = EndpointProfileSerializer
    queryset = EndpointProfile.objects.all()
    permission_classes = [IsAdmin]

    @extend_schema(request=None, responses={202: None})
    @action(detail=True, methods=["post"])
    def check(self, request, pk=None):
        """Probe the endpoint with tiny requests in a worker: which structured-output and tool modes it honours
        and its context window. The findings and their evidence appear in `capabilities` when it is done."""
        endpoint_check_run.delay(self.get_object().pk)
        return Response(status=status.HTTP_202_ACCEPTED)
