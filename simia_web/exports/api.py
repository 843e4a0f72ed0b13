"""REST endpoints of dataset snapshots: request one (a job builds it), inspect it, download it."""

import base64

from django.core.exceptions import ValidationError
from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.api import ErrorSerializer
from simia_web.accounts.permissions import ReadMemberWriteCurator
from simia_web.jobs.api import drf_validation_error

from .formats import CONTENT_TYPES
from .models import ExportFormat, FileKind, Snapshot
from .selectors import snapshot_list
from .services import snapshot_create, snapshot_path

FILE_KINDS_HELP = (
    "data (the records, in the format's layout), manifest (JSONL, one line per record in the data's order: "
    "trajectory_id, version, decision_id, decided_by, judge verdict and score, sha256 of the record's bytes), "
    "report (JSON: counts, records left out by reason with examples, the data's and the manifest's sha256)."
)
FILE_CONTENT_TYPES = {FileKind.MANIFEST: "application/jsonl", FileKind.REPORT: "application/json"}


class SnapshotFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=FileKind.choices, help_text=FILE_KINDS_HELP)
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField()
    download_url = serializers.CharField()


def _download_path(snapshot: Snapshot, kind: str) -> str:
    path = f"/api/v1/snapshots/{snapshot.pk}/download/"
    return path if kind == FileKind.DATA else f"{path}?file={kind}"


class SnapshotSerializer(serializers.ModelSerializer):
    status = serializers.CharField(source="job.status", read_only=True, help_text="The building job's status.")
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    download_url = serializers.SerializerMethodField(help_text="The data file.")
    files = serializers.SerializerMethodField()
    refused_count = serializers.IntegerField(
        read_only=True, help_text="Records left out: they failed the strict normaliser or the format's validator."
    )
    refusal_reasons = serializers.DictField(
        child=serializers.IntegerField(), read_only=True, help_text="{reason: records left out for it}"
    )
    refusals = serializers.ListField(
        read_only=True, help_text="The first 1000 records left out: [{trajectory, reasons}]."
    )

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
            "files",
        ]

    def _url(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    def get_download_url(self, snapshot) -> str | None:
        return self._url(_download_path(snapshot, FileKind.DATA)) if snapshot.is_built else None

    @extend_schema_field(SnapshotFileSerializer(many=True))
    def get_files(self, snapshot) -> list[dict]:
        """The data, the manifest and the report, each with its size, sha256 and where to download it."""
        return [
            {
                "name": entry["name"],
                "kind": entry["kind"],
                "bytes": entry["bytes"],
                "sha256": entry["sha256"],
                "download_url": self._url(_download_path(snapshot, entry["kind"])),
            }
            for entry in (snapshot.files if snapshot.is_built else [])
        ]


class SnapshotCreateSerializer(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=ExportFormat.choices,
        help_text="openai: JSONL of {messages, tools}. sharegpt: a zip of data.jsonl, dataset_info.json and "
        "manifest.jsonl (unzip and pass the folder to LLaMA-Factory as dataset_dir). tau2: one JSON {tasks, "
        "simulations}. Every snapshot also has a manifest and a report (see `files`).",
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
        parameters=[
            OpenApiParameter(
                "file", enum=FileKind.values, default=FileKind.DATA, description="Which file: " + FILE_KINDS_HELP
            )
        ],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The file; its sha256 is in the X-Checksum-SHA256 header."
            ),
            400: OpenApiResponse(ErrorSerializer, description="No such file kind."),
            404: OpenApiResponse(ErrorSerializer, description="The snapshot was built before it had this file."),
            409: OpenApiResponse(ErrorSerializer, description="Not built (yet), or the build failed."),
        },
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def download(self, request, pk=None):
        snapshot = self.get_object()
        kind = request.query_params.get("file", FileKind.DATA)
        if kind not in FileKind.values:
            return Response({"detail": f"file: choose one of {', '.join(FileKind.values)}"}, status=400)
        if not snapshot.is_built:
            body = {"detail": f"Snapshot {snapshot.pk} is not built ({snapshot.job.status})."}
            return Response(body, status=status.HTTP_409_CONFLICT)
        entry, path = snapshot.file_entry(kind), snapshot_path(snapshot, kind)
        if entry is None or path is None or not path.is_file():
            body = {"detail": f"Snapshot {snapshot.pk} has no {kind} file (built before snapshots had one)."}
            return Response(body, status=status.HTTP_404_NOT_FOUND)
        response = FileResponse(
            open(path, "rb"),  # noqa: SIM115 (FileResponse streams and closes it)
            as_attachment=True,
            filename=entry["name"],
            content_type=CONTENT_TYPES[snapshot.format] if kind == FileKind.DATA else FILE_CONTENT_TYPES[kind],
        )
        response["X-Checksum-SHA256"] = entry["sha256"]
        response["Repr-Digest"] = f"sha-256=:{base64.b64encode(bytes.fromhex(entry['sha256'])).decode()}:"
        return response
