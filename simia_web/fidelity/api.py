"""REST endpoints of fidelity runs (read): a run's totals per API, its trajectories and its calls. A run is
queued like any job: POST /api/v1/jobs/ with kind "fidelity"."""

from rest_framework import serializers, viewsets
from rest_framework.decorators import action

from .models import FidelityCall, FidelityRun, FidelityTrajectory, Outcome


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
        runs = FidelityRun.objects.select_related("domain").only(*FidelityRunSerializer.Meta.fields, "domain__name")
        domain = self.request.query_params.get("domain")
        return runs.filter(domain__name=domain[:80]) if domain else runs

    @action(detail=True, serializer_class=FidelityTrajectorySerializer)
    def trajectories(self, request, pk=None):
        rows = FidelityTrajectory.objects.filter(run=self.get_object())
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(self.get_serializer(page, many=True).data)

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
