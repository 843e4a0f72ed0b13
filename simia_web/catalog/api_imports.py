"""REST endpoints for real APIs: importing a domain's APIs (OpenAPI document or MCP server), and a domain's
reference environment."""

from drf_spectacular.utils import extend_schema
from rest_framework import parsers, serializers, status
from rest_framework.response import Response
from rest_framework.views import APIView

from simia_web.accounts.permissions import IsCurator, ReadMemberWriteCurator
from simia_web.accounts.rest import request_workspace_ids
from simia_web.accounts.scoping import role_require_in
from simia_web.core.errors import NotFound

from .api import ImportRejectedSerializer, ImportResultSerializer, upload_refused, upload_workspace
from .importers import apis_import
from .mcp import McpServer
from .models import Domain, DomainReference
from .references import ReferenceConfig, reference_clear, reference_set
from .selectors import domain_named


class ApiImportSerializer(serializers.Serializer):
    domain = serializers.SlugField(max_length=80, help_text="The domain to import into (created when new).")
    workspace = serializers.SlugField(
        required=False, max_length=50, help_text="The workspace the domain is in (needed if you belong to several)."
    )
    openapi = serializers.FileField(required=False, help_text="An OpenAPI 3 document (JSON or YAML).")
    mcp_url = serializers.CharField(required=False, max_length=2000, help_text="A streamable-HTTP MCP server.")
    mcp_command = serializers.CharField(
        required=False, max_length=2000, help_text="An MCP server to run over stdio (site administrators only)."
    )

    def validate(self, data):
        given = [name for name in ("openapi", "mcp_url", "mcp_command") if data.get(name)]
        if len(given) != 1:
            raise serializers.ValidationError({"source": "give exactly one of openapi, mcp_url and mcp_command"})
        return data


class ApiImportView(APIView):
    permission_classes = [IsCurator]
    parser_classes = [parsers.MultiPartParser, parsers.FormParser, parsers.JSONParser]

    @extend_schema(
        request={"multipart/form-data": ApiImportSerializer, "application/json": ApiImportSerializer},
        responses={201: ImportResultSerializer, 400: ImportRejectedSerializer},
        description="Import a domain's APIs with the same service and checks as `import_apis`, into the workspace "
        "`workspace` names (or your only one). Nothing is written on error; an MCP command needs a site administrator.",
    )
    def post(self, request):
        form = ApiImportSerializer(data=request.data)
        if not form.is_valid():
            raise upload_refused(form, getattr(request.data.get("openapi"), "name", ""))
        data = form.validated_data
        workspace = upload_workspace(request, data.get("workspace"), getattr(data.get("openapi"), "name", ""))
        server = None
        if not data.get("openapi"):
            server = McpServer(command=data.get("mcp_command", ""), url=data.get("mcp_url", ""))
        result = apis_import(
            domain=data["domain"],
            openapi=data.get("openapi"),
            mcp=server,
            workspace_id=workspace.pk,
            actor=request.user,
        )
        return Response(result.as_dict(), status=status.HTTP_201_CREATED)


class DomainReferenceSerializer(serializers.ModelSerializer):
    class Meta:
        model = DomainReference
        fields = ["command", "url", "reset_tool", "response_pointer", "updated_at"]
        read_only_fields = ["updated_at"]


class DomainReferenceView(APIView):
    """A domain's reference environment: read by members, named or removed by curators (a command by admins) of
    the domain's workspace. Another workspace's domain is not found."""

    permission_classes = [ReadMemberWriteCurator]

    def _domain(self, name: str, *, write: bool = False) -> Domain:
        domain = domain_named(name=name, workspace_ids=request_workspace_ids(self.request))
        if domain is None or domain.workspace_id is None:
            raise NotFound("No domain matches.")
        if write:
            role_require_in(self.request.user, domain.workspace_id, "curator")
        return domain

    @extend_schema(responses={200: DomainReferenceSerializer})
    def get(self, request, name: str):
        reference = DomainReference.objects.filter(domain=self._domain(name)).first()
        if reference is None:
            raise NotFound("The domain has no reference environment.")
        return Response(DomainReferenceSerializer(reference).data)

    @extend_schema(request=DomainReferenceSerializer, responses={200: DomainReferenceSerializer})
    def put(self, request, name: str):
        domain = self._domain(name, write=True)
        form = DomainReferenceSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        reference = reference_set(domain=domain, config=ReferenceConfig(**form.validated_data), actor=request.user)
        return Response(DomainReferenceSerializer(reference).data)

    @extend_schema(responses={204: None})
    def delete(self, request, name: str):
        if not reference_clear(domain=self._domain(name, write=True), actor=request.user):
            raise NotFound("The domain has no reference environment.")
        return Response(status=status.HTTP_204_NO_CONTENT)
