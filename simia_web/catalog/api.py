"""REST endpoints of the catalog: domains, APIs, tasks and seeds (read), and the seed upload.

Each reads the rows of the caller's workspaces (or of the one `?workspace=SLUG` names): another workspace's object
is not found. An upload goes to the workspace `workspace` names, or the caller's only one."""

from collections.abc import Callable

from django.db.models import QuerySet
from drf_spectacular.utils import extend_schema
from rest_framework import parsers, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.permissions import IsCurator, IsMember
from simia_web.accounts.rest import WorkspaceScopedListMixin, request_workspace_ids
from simia_web.accounts.scoping import workspace_for_write
from simia_web.core.errors import ValidationFailed

from .filters import ApiFilter, DomainFilter, SeedFilter, TaskFilter
from .importers import FORMATS, ImportIssue, ImportRejected, seeds_import
from .models import Api, Domain, Seed, Task
from .selectors import (
    api_details,
    api_list,
    domain_list,
    domains_counted,
    seed_details,
    seed_list,
    task_details,
    task_list,
)


class DomainSummarySerializer(serializers.ModelSerializer):
    api_count = serializers.IntegerField(read_only=True)
    task_count = serializers.IntegerField(read_only=True)
    seed_count = serializers.IntegerField(read_only=True)

    class Meta:
        model = Domain
        fields = ["id", "name", "description", "source", "version", "api_count", "task_count", "seed_count"]


class DomainDetailSerializer(DomainSummarySerializer):
    class Meta(DomainSummarySerializer.Meta):
        fields = [
            *DomainSummarySerializer.Meta.fields,
            "policy",
            "state_schema",
            "initial_state",
            "state_errors",
            "job",
            "provenance",
            "content_hash",
            "created_at",
            "updated_at",
        ]


class ApiSerializer(serializers.ModelSerializer):
    domain: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Api
        fields = [
            "id",
            "domain",
            "name",
            "description",
            "kind",
            "parameters",
            "returns",
            "touches",
            "valid",
            "errors",
            "version",
            "job",
            "provenance",
            "content_hash",
            "created_at",
            "updated_at",
        ]


class TaskSummarySerializer(serializers.ModelSerializer):
    domain: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Task
        fields = ["id", "domain", "external_id", "instruction", "difficulty", "status", "version", "job", "created_at"]


class TaskDetailSerializer(TaskSummarySerializer):
    class Meta(TaskSummarySerializer.Meta):
        fields = [
            *TaskSummarySerializer.Meta.fields,
            "user_scenario",
            "apis_needed",
            "expected_outcome",
            "expected_actions",
            "errors",
            "duplicate_of",
            "provenance",
            "content_hash",
            "updated_at",
        ]


class SeedSummarySerializer(serializers.ModelSerializer):
    domain: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Seed
        fields = ["id", "domain", "source_format", "source_name", "source_record", "usable", "version", "created_at"]


class SeedDetailSerializer(SeedSummarySerializer):
    class Meta(SeedSummarySerializer.Meta):
        fields = [
            *SeedSummarySerializer.Meta.fields,
            "messages",
            "tools",
            "problems",
            "created_by",
            "job",
            "provenance",
            "content_hash",
            "updated_at",
        ]


class SeedUploadSerializer(serializers.Serializer):
    file = serializers.FileField(help_text="A ShareGPT or OpenAI chat file (.json/.jsonl), or a τ²-bench .zip.")
    format = serializers.ChoiceField(choices=FORMATS)
    domain = serializers.SlugField(required=False, max_length=80, help_text="Target domain (default: from the file).")
    workspace = serializers.SlugField(
        required=False, max_length=50, help_text="The workspace to import into (needed if you belong to several)."
    )


class ImportIssueSerializer(serializers.Serializer):
    file = serializers.CharField()
    line = serializers.IntegerField(allow_null=True)
    field = serializers.CharField()
    message = serializers.CharField()
    record = serializers.IntegerField(allow_null=True)


class ImportResultSerializer(serializers.Serializer):
    domain = serializers.CharField()
    format = serializers.CharField()
    created = serializers.DictField(child=serializers.IntegerField())
    skipped_duplicates = serializers.DictField(child=serializers.IntegerField())
    unusable_seeds = serializers.IntegerField()
    notes = serializers.ListField(child=serializers.CharField())


class ImportRejectedSerializer(serializers.Serializer):
    detail = serializers.CharField()
    total = serializers.IntegerField()
    # A response body's field, where the stubs type Serializer.errors (the validation errors of its input).
    errors = ImportIssueSerializer(many=True)  # type: ignore[assignment]


UPLOAD_REFUSED = "Upload refused; nothing was written."


def upload_refused(form: serializers.Serializer, file_name: str) -> ImportRejected:
    """An import request whose fields are wrong, refused in the same shape as a refused import."""
    issues = [
        ImportIssue(file_name, None, name, str(message))
        for name, messages in form.errors.items()
        for message in messages
    ]
    return ImportRejected(issues, detail=UPLOAD_REFUSED)


def upload_workspace(request, slug: str | None, file_name: str):
    """The workspace an import goes to (workspace_for_write), its refusal in the shape of every refused upload."""
    try:
        return workspace_for_write(request.user, slug, role="curator")
    except ValidationFailed as exc:
        raise ImportRejected([ImportIssue(file_name, None, exc.field, exc.detail)], detail=UPLOAD_REFUSED) from None


class CatalogViewSet(WorkspaceScopedListMixin, viewsets.ReadOnlyModelViewSet):
    """A catalog resource: the list answered by its selector, the detail found among the rows of the request's
    workspaces by `details_selector` (another workspace's row is a 404)."""

    details_selector: Callable[..., QuerySet]

    def get_queryset(self):
        return type(self).details_selector(workspace_ids=request_workspace_ids(self.request))


class SummaryDetailViewSet(CatalogViewSet):
    """List endpoints answer summaries; the detail endpoint the whole object."""

    summary_serializer: type[serializers.Serializer]
    detail_serializer: type[serializers.Serializer]

    def get_serializer_class(self):
        return self.summary_serializer if self.action == "list" else self.detail_serializer


class DomainViewSet(SummaryDetailViewSet):
    summary_serializer, detail_serializer = DomainSummarySerializer, DomainDetailSerializer
    lookup_field = "name"
    lookup_value_regex = "[-a-zA-Z0-9_]+"
    filterset_class = DomainFilter
    list_selector = staticmethod(domain_list)
    details_selector = staticmethod(domains_counted)


class ApiViewSet(CatalogViewSet):
    serializer_class = ApiSerializer
    filterset_class = ApiFilter
    list_selector = staticmethod(api_list)
    details_selector = staticmethod(api_details)


class TaskViewSet(SummaryDetailViewSet):
    summary_serializer, detail_serializer = TaskSummarySerializer, TaskDetailSerializer
    filterset_class = TaskFilter
    list_selector = staticmethod(task_list)
    details_selector = staticmethod(task_details)


class SeedViewSet(SummaryDetailViewSet):
    summary_serializer, detail_serializer = SeedSummarySerializer, SeedDetailSerializer
    filterset_class = SeedFilter
    list_selector = staticmethod(seed_list)
    details_selector = staticmethod(seed_details)

    def get_permissions(self):
        return [IsCurator()] if self.action == "upload" else [IsMember()]

    @extend_schema(
        request={"multipart/form-data": SeedUploadSerializer},
        responses={201: ImportResultSerializer, 400: ImportRejectedSerializer},
        description="Import seeds with the same service and checks as `import_seeds`, into a domain of the workspace "
        "`workspace` names (or your only one). Nothing is written on error.",
    )
    @action(
        detail=False,
        methods=["post"],
        parser_classes=[parsers.MultiPartParser, parsers.FormParser],
        filter_backends=[],
        pagination_class=None,
    )
    def upload(self, request):
        form = SeedUploadSerializer(data=request.data)
        if not form.is_valid():
            raise upload_refused(form, getattr(request.data.get("file"), "name", ""))
        workspace = upload_workspace(request, form.validated_data.get("workspace"), form.validated_data["file"].name)
        result = seeds_import(
            source=form.validated_data["file"],
            format=form.validated_data["format"],
            domain=form.validated_data.get("domain"),
            workspace_id=workspace.pk,
            actor=request.user,
        )
        return Response(result.as_dict(), status=status.HTTP_201_CREATED)
