"""REST: a domain's guidelines. Members read them (the domain's own, or the workspace's default it follows);
curators of the domain's workspace write them, naming the version they edited: a stale version is 409, the version
of guidelines not written yet 400. Another workspace's domain is not found."""

from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from simia_web.accounts.models import owner_workspace_id
from simia_web.accounts.permissions import ReadMemberWriteCurator
from simia_web.accounts.rest import request_workspace_ids
from simia_web.accounts.scoping import role_require_in
from simia_web.core.errors import NotFound

from .guidelines import GUIDELINES_MAX_CHARS, guidelines_in_force, guidelines_save
from .models import Domain
from .selectors import domain_named


class GuidelinesSerializer(serializers.Serializer):
    domain = serializers.CharField(help_text="The domain's name.")
    text = serializers.CharField(allow_blank=True, help_text="The guidelines in force on the domain, in Markdown.")
    version = serializers.IntegerField(
        help_text="The version of the domain's own guidelines (0: it has none yet); name it in a PUT."
    )
    inherited = serializers.BooleanField(
        help_text="The text is the workspace's default: the domain has none of its own."
    )
    in_force_version = serializers.IntegerField(
        allow_null=True,
        help_text="The version of the guidelines in force (the default's when inherited) that decisions record.",
    )
    updated_at = serializers.DateTimeField(allow_null=True)


class GuidelinesWriteSerializer(serializers.Serializer):
    text = serializers.CharField(allow_blank=True, max_length=GUIDELINES_MAX_CHARS, trim_whitespace=False)
    version = serializers.IntegerField(
        min_value=0, max_value=2**31 - 1, help_text="The version you edited (0 for the first): a stale one is 409."
    )
    note = serializers.CharField(required=False, allow_blank=True, max_length=300)


def _body(domain: Domain) -> dict:
    force = guidelines_in_force(domain_id=domain.pk)
    own = force.guidelines if not force.inherited else None
    return {
        "domain": domain.name,
        "text": force.text,
        "version": own.version if own is not None else 0,
        "inherited": force.inherited,
        "in_force_version": force.version,
        "updated_at": force.guidelines.updated_at if force.guidelines is not None else None,
    }


class DomainGuidelinesView(APIView):
    permission_classes = [ReadMemberWriteCurator]

    def _domain(self, name: str, *, write: bool = False) -> Domain:
        domain = domain_named(name=name, workspace_ids=request_workspace_ids(self.request))
        if domain is None:
            raise NotFound("No domain matches.")
        if write:
            role_require_in(self.request.user, owner_workspace_id(domain), "curator")
        return domain

    @extend_schema(responses={200: GuidelinesSerializer})
    def get(self, request, name: str):
        return Response(GuidelinesSerializer(_body(self._domain(name))).data)

    @extend_schema(
        request=GuidelinesWriteSerializer,
        responses={
            200: GuidelinesSerializer,
            400: OpenApiResponse(description="A field is wrong, or the version names guidelines not written yet."),
            409: OpenApiResponse(description="Refused: the guidelines changed after the version you named."),
        },
    )
    def put(self, request, name: str):
        domain = self._domain(name, write=True)
        body = GuidelinesWriteSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        guidelines_save(
            workspace_id=owner_workspace_id(domain),
            domain=domain,
            text=data["text"],
            expected_version=data["version"],
            actor=request.user,
            note=data.get("note", ""),
        )
        return Response(GuidelinesSerializer(_body(domain)).data)
