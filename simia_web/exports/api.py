"""REST endpoints of dataset snapshots: request one (a job builds it), inspect it, download it."""

import base64
from pathlib import Path

from django.http import FileResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.permissions import ReadMemberWriteCurator
from simia_web.accounts.rest import WorkspaceScopedListMixin, request_workspace_ids, workspace_write_field
from simia_web.accounts.scoping import workspace_for_write
from simia_web.core.rest import ErrorSerializer, FormatIsAFilter
from simia_web.curation.duplicates import KEEP_ORDERS

from .filters import SnapshotFilter
from .models import ExportFormat, FileKind, Snapshot
from .selectors import snapshot_download_path, snapshot_file, snapshot_list, snapshots
from .services import snapshot_create
from .writers import CONTENT_TYPES

FILE_KINDS_HELP = (
    "data (the records, in the format's layout; Parquet's are shards `data/train-00000-of-00002.parquet`), manifest "
    "(JSONL, one line per record in the data's order: trajectory_id, version, decision_id, decided_by, judge verdict "
    "and score, sha256 of the record's bytes), card (the Hugging Face dataset card README.md: counts by domain, API "
    "and status, turns, tool calls and length, judge pass rates, agreement with people, what was left out, models, "
    "prompt versions, endpoint profiles and seeds), image (the card's plots, PNG), report (JSON: counts, records "
    "left out by reason with examples, every other file's sha256)."
)
FILE_CONTENT_TYPES = {
    FileKind.MANIFEST: "application/jsonl",
    FileKind.REPORT: "application/json",
    FileKind.CARD: "text/markdown; charset=utf-8",
    FileKind.IMAGE: "image/png",
}


class SnapshotFileSerializer(serializers.Serializer):
    name = serializers.CharField()
    kind = serializers.ChoiceField(choices=FileKind.choices, help_text=FILE_KINDS_HELP)
    bytes = serializers.IntegerField()
    sha256 = serializers.CharField()
    download_url = serializers.CharField()


class SnapshotHubSerializer(serializers.Serializer):
    status = serializers.ChoiceField(choices=["pushed", "skipped", "failed"])
    detail = serializers.CharField()
    repo = serializers.CharField()
    url = serializers.CharField(help_text="The Hub commit, when pushed.")
    at = serializers.DateTimeField()


class SnapshotCertificationSerializer(serializers.Serializer):
    audit = serializers.IntegerField()
    max_error_rate = serializers.FloatField()


class SnapshotOptionsSerializer(serializers.Serializer):
    shard_rows = serializers.IntegerField(
        required=False, min_value=1, help_text="Parquet: rows per shard at most (default SIMIA_EXPORT_SHARD_ROWS)."
    )
    shard_bytes = serializers.IntegerField(
        required=False,
        min_value=1024 * 1024,
        help_text="Parquet: a shard ends at the first row group past this size (default SIMIA_EXPORT_SHARD_BYTES).",
    )
    push_to_hub = serializers.BooleanField(
        required=False,
        help_text="After the build, push the files to a Hugging Face dataset repo (needs HF_TOKEN; skipped with a "
        "reason in `hub` otherwise).",
    )
    hub_repo = serializers.CharField(
        required=False, help_text='The dataset repo, "owner/name" (default SIMIA_HF_DATASET_REPO).'
    )
    dedup = serializers.ChoiceField(
        choices=list(KEEP_ORDERS),
        required=False,
        help_text="Keep one trajectory per near-duplicate cluster: the one accepted first (then the highest judge "
        "score), or the one with the highest judge score; the report and the dataset card say how many were removed.",
    )


class SnapshotSerializer(serializers.ModelSerializer):
    status = serializers.CharField(source="job.status", read_only=True, help_text="The building job's status.")
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
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
    options = SnapshotOptionsSerializer(read_only=True)
    hub = serializers.SerializerMethodField()
    audit = serializers.SerializerMethodField()

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "format",
            "filters",
            "options",
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
            "hub",
            "audit",
        ]

    def _url(self, path: str) -> str:
        request = self.context.get("request")
        return request.build_absolute_uri(path) if request else path

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_download_url(self, snapshot) -> str | None:
        """The data file; null while not built and for Parquet, whose shards are in `files`."""
        data = [entry for entry in snapshot.files if entry["kind"] == FileKind.DATA] if snapshot.is_built else []
        return self._url(snapshot_download_path(snapshot, data[0])) if len(data) == 1 else None

    @extend_schema_field(SnapshotFileSerializer(many=True))
    def get_files(self, snapshot) -> list[dict]:
        """The data (one entry per shard), the manifest, the card and its plots, and the report, each with its
        size, sha256 and where to download it."""
        return [
            {
                "name": entry["name"],
                "kind": entry["kind"],
                "bytes": entry["bytes"],
                "sha256": entry["sha256"],
                "download_url": self._url(snapshot_download_path(snapshot, entry)),
            }
            for entry in (snapshot.files if snapshot.is_built else [])
        ]

    @extend_schema_field(SnapshotCertificationSerializer(allow_null=True))
    def get_audit(self, snapshot) -> dict | None:
        """The audit certifying the snapshot and the ceiling on its upper bound, when asked (the figures are in the
        report's `audit` block)."""
        return snapshot.options.get("certify") or None

    @extend_schema_field(SnapshotHubSerializer(allow_null=True))
    def get_hub(self, snapshot) -> dict | None:
        """Where the files were published, when `push_to_hub` was asked: pushed, skipped or failed, and why."""
        return snapshot.hub or None


class SnapshotCreateSerializer(serializers.Serializer):
    format = serializers.ChoiceField(
        choices=ExportFormat.choices,
        help_text="openai: JSONL of {messages, tools}. sharegpt: a zip of data.jsonl, dataset_info.json and "
        "manifest.jsonl (unzip and pass the folder to LLaMA-Factory as dataset_dir). tau2: one JSON {tasks, "
        "simulations}. parquet: shards data/train-NNNNN-of-NNNNN.parquet with messages and tools as nested columns "
        "(datasets.load_dataset('parquet', data_files=...)). Every snapshot also has a manifest, a dataset card "
        "(README.md with plots) and a report (see `files`).",
    )
    filters = serializers.DictField(
        required=False,
        default=dict,
        help_text="Trajectory filters as in GET /trajectories/ (domain, job, status, kind, judge_passed, "
        "min_score, max_score, violation, q). The status defaults to accepted; `all` takes every status.",
    )
    options = SnapshotOptionsSerializer(required=False)
    audit = serializers.IntegerField(
        required=False,
        allow_null=True,
        min_value=1,
        help_text="Certify the snapshot by this audit: refused (400) while the audit's upper bound is above "
        "`max_error_rate`; the report, the dataset card and the manifest carry the audit's block.",
    )
    max_error_rate = serializers.FloatField(
        required=False,
        allow_null=True,
        min_value=0,
        max_value=1,
        help_text="The ceiling on the audit's upper bound (a share: 0.05 is 5%), given with `audit`.",
    )
    workspace = workspace_write_field()


class SnapshotViewSet(WorkspaceScopedListMixin, mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    permission_classes = [ReadMemberWriteCurator]
    serializer_class = SnapshotSerializer
    filterset_class = SnapshotFilter
    list_selector = staticmethod(snapshot_list)
    content_negotiation_class = FormatIsAFilter

    def get_queryset(self):
        return snapshots(workspace_ids=request_workspace_ids(self.request))

    @extend_schema(
        request=SnapshotCreateSerializer,
        responses={
            202: SnapshotSerializer,
            400: OpenApiResponse(
                description="A field is wrong, named: {field: [message]} (a certified snapshot whose audit's upper "
                "bound is above `max_error_rate` is refused naming both)."
            ),
        },
    )
    def create(self, request, *args, **kwargs):
        form = SnapshotCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        workspace = workspace_for_write(request.user, form.validated_data.get("workspace"), role="curator")
        snapshot = snapshot_create(
            format=form.validated_data["format"],
            filters=form.validated_data["filters"],
            options=form.validated_data.get("options"),
            actor=request.user,
            audit=form.validated_data.get("audit"),
            max_error_rate=form.validated_data.get("max_error_rate"),
            workspace_id=workspace.pk,
        )
        return Response(self.get_serializer(snapshot).data, status=status.HTTP_202_ACCEPTED)

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "file", enum=FileKind.values, default=FileKind.DATA, description="Which file: " + FILE_KINDS_HELP
            ),
            OpenApiParameter(
                "name",
                str,
                description="A file by its name in `files` (`data/train-00000-of-00002.parquet`, `images/turns.png`); "
                "takes precedence over `file`.",
            ),
        ],
        responses={
            (200, "application/octet-stream"): OpenApiResponse(
                OpenApiTypes.BINARY, description="The file; its sha256 is in the X-Checksum-SHA256 header."
            ),
            400: OpenApiResponse(
                ErrorSerializer, description="No such file kind, or the kind has several files (name one)."
            ),
            404: OpenApiResponse(
                ErrorSerializer, description="No such file (or the snapshot was built before it had this file)."
            ),
            409: OpenApiResponse(ErrorSerializer, description="Not built (yet), or the build failed."),
        },
    )
    @action(detail=True, methods=["get"], filter_backends=[])
    def download(self, request, pk=None):
        snapshot = self.get_object()
        entry, path = snapshot_file(
            snapshot, name=request.query_params.get("name"), kind=request.query_params.get("file", FileKind.DATA)
        )
        content_type = CONTENT_TYPES[snapshot.format] if entry["kind"] == FileKind.DATA else None
        response = FileResponse(
            open(path, "rb"),  # noqa: SIM115 (FileResponse streams and closes it)
            as_attachment=True,
            filename=Path(entry["name"]).name,
            content_type=content_type or FILE_CONTENT_TYPES[entry["kind"]],
        )
        response["X-Checksum-SHA256"] = entry["sha256"]
        response["Repr-Digest"] = f"sha-256=:{base64.b64encode(bytes.fromhex(entry['sha256'])).decode()}:"
        return response
