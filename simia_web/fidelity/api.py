"""REST endpoints of fidelity runs (read): a run's totals per API, its trajectories and its calls. A run is
queued like any job: POST /api/v1/jobs/ with kind "fidelity". The runs are those of the caller's workspaces (or of
the one `?workspace=SLUG` names); another workspace's run is not found."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers, viewsets
from rest_framework.decorators import action

from simia_web.accounts.rest import WORKSPACE_PARAMETER, request_workspace_ids

from .models import FidelityCall, FidelityRun, FidelityTrajectory, Outcome
from .selectors import runs_in


class FidelityRunSerializer(serializers.ModelSerializer):
    domain: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = FidelityRun
        fields = ["id", "domain", "job", "reference", "method", "limit", "summary", "created_at", "finished_at"]


class FidelityTrajectorySerializer(serializers.ModelSerializer):
    class Meta:
        model = FidelityTrajectory
        fields = ["id", "trajectory", "trajectory_version", "counts", "calls", "skipped", "score", "error"]


class FidelityCallSerializer(serializers.ModelSerializer):
    trajectory = serializers.IntegerField(source="result.trajectory_id", read_only=True)

    class Meta:
        model = FidelityCall
        fields = [
            "id",
            "trajectory",
            "message_index",
            "position",
            "api",
            "arguments",
            "simulated",
            "reference",
            "reference_is_error",
            "outcome",
            "detail",
        ]


class FidelityRunViewSet(viewsets.ReadOnlyModelViewSet):
    serializer_class = FidelityRunSerializer

    def get_queryset(self):
        runs = runs_in(workspace_ids=request_workspace_ids(self.request)).select_related("domain")
        runs = runs.only(*FidelityRunSerializer.Meta.fields, "domain__name")
        domain = self.request.query_params.get("domain")
        return runs.filter(domain__name=domain[:80]) if domain else runs

    @extend_schema(
        parameters=[WORKSPACE_PARAMETER, OpenApiParameter("domain", str, description="Only this domain's runs.")]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @action(detail=True, serializer_class=FidelityTrajectorySerializer)
    def trajectories(self, request, pk=None):
        rows = FidelityTrajectory.objects.filter(run=self.get_object())
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

    @extend_schema(
        parameters=[
            OpenApiParameter("api", str, description="Only this API's calls."),
            OpenApiParameter("outcome", str, enum=Outcome.values, description="Only calls of this outcome."),
        ]
    )
    @action(detail=True, serializer_class=FidelityCallSerializer)
    def calls(self, request, pk=None):
        """The run's calls, optionally of one API (`api`) and one outcome (`outcome`)."""
        rows = FidelityCall.objects.filter(run=self.get_object()).select_related("result")
        if api := request.query_params.get("api"):
            rows = rows.filter(api=api[:120])
        if (outcome := request.query_params.get("outcome")) in Outcome.values:
            rows = rows.filter(outcome=outcome)
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
