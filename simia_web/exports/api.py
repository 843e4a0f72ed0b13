"""REST endpoints of dataset snapshots: request one (a job builds it), inspect it, download it."""

import base64

from django.core.exceptions import ValidationError
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.api import ErrorSerializer
from simia_web.accounts.permissions import ReadMemberWriteCurator
from simia_web.jobs.api import drf_validation_error

from .formats import CONTENT_TYPES
from .models import ExportFormat, Snapshot
from .selectors import snapshot_list
from .services import snapshot_create, snapshot_path


class SnapshotSerializer(serializers.ModelSerializer):
    status = serializers.CharField(source="job.status", read_only=True, help_text="The building job's status.")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    download_url = serializers.SerializerMethodField()

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "format",
            "filters",
            "status",
            "job",
            "count",
            "bytes",
            "sha256",
            "repaired_count",
            "refused_count",
            "refusal_reasons",
            "refusals",
            "error",
            "created_by",
            "created_at",
            "built_at",
            "download_url",
        ]

    def get_download_url(self, snapshot) -> str | None:
        if not snapshot.is_built:
            return None
        request = self.context.get("request")
        path = f"/api/v1/snapshots/{snapshot.pk}/download/"
        return request.build_absolute_uri(path) if request else path


class SnapshotCreateSerializer(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=ExportFormat.choices,
        help_text="openai: JSONL of {messages, tools}. sharegpt: a zip of data.jsonl and dataset_info.json "
        "(unzip and pass the folder to LLaMA-Factory as dataset_dir). tau2: one JSON {tasks, simulations}.",
    )
    filters = serializers.DictField(
        required=False,
        default=dict,
        help_text="Trajectory filters as in GET /trajectories/ (domain, job, status, kind, judge_passed, "
        "min_score, max_score, violation, q). The status defaults to accepted; `all` takes every status.",
    )


class SnapshotViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadMemberWriteCurator]
    serializer_class = SnapshotSerializer
    filterset_fields = ["format"]

    def get_queryset(self):
        return snapshot_list()

    @extend_schema(request=SnapshotCreateSerializer, responses={202: SnapshotSerializer})
    def create(self, request, *args, **kwargs):
        form = SnapshotCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        try:
            snapshot = snapshot_create(
                format=form.validated_data["format"], filters=form.validated_data["filters"], actor=request.user
            )
        except ValidationError as exc:
            raise drf_validation_error(exc) from None
        return Response(self.get_serializer(snapshot).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The file; its sha256 is in the X-Checksum-SHA256 header."
            ),
            409: OpenApiResponse(ErrorSerializer, description="Not built (yet), or the build failed."),
        }
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def download(self, request, pk=None):
        snapshot = self.get_object()
        path = snapshot_path(snapshot) if snapshot.is_built else None
        if path is None or not path.is_file():
            body = {"detail": f"Snapshot {snapshot.pk} is not built ({snapshot.job.status})."}
            return Response(body, status=status.HTTP_409_CONFLICT)
        response = FileResponse(
            open(path, "rb"),  # noqa: SIM115 (FileResponse streams and closes it)
            as_attachment=True,
            filename=snapshot.file,
            content_type=CONTENT_TYPES[snapshot.format],
        )
        response["X-Checksum-SHA256"] = snapshot.sha256
        response["Repr-Digest"] = f"sha-256=:{base64.b64encode(bytes.fromhex(snapshot.sha256)).decode()}:"
        return response
