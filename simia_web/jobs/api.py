"""REST endpoints of jobs: list and inspect with progress, queue a job of any registered kind, cancel."""

from functools import cache
from typing import Any

from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from simia_web.accounts.permissions import ReadMemberWriteCurator
from simia_web.accounts.rest import WORKSPACE_PARAMETER, request_workspace_ids, workspace_write_field
from simia_web.accounts.scoping import role_require_in, workspace_for_write
from simia_web.core.rest import ErrorSerializer

from .filters import JobFilter
from .kinds import job_kinds_queueable
from .models import Job
from .selectors import (
    UNITS_IN_PROGRESS_SHOWN,
    job_progress,
    job_summary,
    job_units_in_progress,
    job_usage,
    jobs_in,
    jobs_progress,
)
from .services import job_cancel, job_queue


class JobSummarySerializer(serializers.ModelSerializer):
    kind = serializers.CharField(read_only=True, help_text="The job kind (see the kinds queued by POST).")
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    progress = serializers.SerializerMethodField(
        help_text="{stage: {total, pending, done, failed, cancelled, errored}}: errored units ended having stored "
        "an error (a trajectory cut short by a failed LLM call, a judge verdict whose call failed), not counted as done"
    )

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "status",
            "stage",
            "params",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "progress",
        ]

    def get_progress(self, job) -> dict[str, dict[str, int]]:
        progress = self.context.get("progress")
        return progress.get(job.pk, {}) if progress is not None else job_progress(job)


class JobUsageSerializer(serializers.Serializer):
    llm_calls = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.FloatField()
    llm_errors = serializers.DictField(child=serializers.IntegerField())


class UnitProgressSerializer(serializers.Serializer):
    unit = serializers.IntegerField()
    stage = serializers.CharField()
    key = serializers.CharField()
    done = serializers.IntegerField()
    total = serializers.IntegerField(help_text="0 when the unit does not know its total")
    what = serializers.CharField(help_text='What `done` and `total` count ("records written or left out")')
    doing = serializers.CharField(help_text='What the unit is doing ("Building snapshot 12"); may be empty')


class JobDetailSerializer(JobSummarySerializer):
    usage = serializers.SerializerMethodField()
    units_in_progress = serializers.SerializerMethodField(
        help_text="The running units of the job's stage that say how far they have got (a snapshot's build: records "
        f"so far of its total), in unit order, at most {UNITS_IN_PROGRESS_SHOWN}; written by the worker's heartbeat, "
        "every SIMIA_UNIT_HEARTBEAT_SECONDS"
    )
    summary = serializers.SerializerMethodField(
        help_text="What the job made, as its kind says (trajectories per status and rejection reasons; an export's "
        "snapshot id, records and sha256), with its units by how they ended, tokens and cost: kept when the job "
        "ends, up to date while it runs"
    )

    class Meta(JobSummarySerializer.Meta):
        fields = [*JobSummarySerializer.Meta.fields, "summary", "usage", "units_in_progress"]

    @extend_schema_field(JobUsageSerializer)
    def get_usage(self, job) -> dict:
        return job_usage(job)

    @extend_schema_field(UnitProgressSerializer(many=True))
    def get_units_in_progress(self, job) -> list[dict]:
        return job_units_in_progress(job)

    def get_summary(self, job) -> dict[str, Any]:
        return job_summary(job) if job.is_active or not job.summary else job.summary


@cache
def _request_serializer(kind: str, parameters: type[serializers.Serializer]) -> type[serializers.Serializer]:
    """The kind's parameters with the `kind` field that selects them, as the request documents them (one class per
    kind, however often the schema is made: a component name stands for one class)."""
    name = parameters.__name__
    fields = {"kind": serializers.ChoiceField(choices=[kind]), "workspace": workspace_write_field()}
    return type(name, (parameters,), {**fields, "__doc__": parameters.__doc__})


class JobSchema(AutoSchema):
    """POST's request is the parameters of one of the kinds that can be queued, chosen by `kind`, read from the
    registry each time the schema is made: a kind comes and goes with its app (drf-spectacular reads a callable
    given to extend_schema once)."""

    def get_request_serializer(self):
        if getattr(self.view, "action", None) != "create":
            return super().get_request_serializer()
        requests: dict[str, serializers.Serializer | type[serializers.Serializer]] = {
            name: _request_serializer(name, kind.parameters_serializer())
            for name, kind in job_kinds_queueable().items()
        }
        return PolymorphicProxySerializer(
            component_name="JobCreate", serializers=requests, resource_type_field_name="kind"
        )


class JobViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadMemberWriteCurator]
    filterset_class = JobFilter
    schema = JobSchema()

    def get_queryset(self):
        return jobs_in(workspace_ids=request_workspace_ids(self.request))

    def get_serializer_class(self):
        return JobSummarySerializer if self.action == "list" else JobDetailSerializer

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "progress": jobs_progress([job.pk for job in page or []])}
        return self.get_paginated_response(JobSummarySerializer(page, many=True, context=context).data)

    @extend_schema(responses={202: JobDetailSerializer})
    def create(self, request, *args, **kwargs):
        if not isinstance(request.data, dict):
            raise ValidationError({"detail": ["send a JSON object"]})
        params = {name: value for name, value in request.data.items() if name not in ("kind", "workspace")}
        workspace = workspace_for_write(request.user, request.data.get("workspace"), role="curator")
        job = job_queue(kind=request.data.get("kind"), params=params, actor=request.user, workspace=workspace)
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data, status=202)

    @extend_schema(
        request=None,
        responses={200: JobDetailSerializer, 409: OpenApiResponse(ErrorSerializer, "The job has already ended.")},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        job = self.get_object()
        role_require_in(request.user, job.workspace_id, "curator")
        job = job_cancel(job=job, actor=request.user)  # an ended job: JobError, a 409 by the handler
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data)
