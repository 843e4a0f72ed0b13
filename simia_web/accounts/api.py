"""`me`: check a token and its role; workspaces and their members."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers
from rest_framework.exceptions import NotFound, PermissionDenied, ValidationError
from rest_framework.generics import ListCreateAPIView, RetrieveAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from . import selectors, services
from .models import Membership, Role, User, Workspace


class MeSerializer(serializers.ModelSerializer):
    current_workspace: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = User
        fields = ["id", "username", "email", "role", "current_workspace", "is_site_admin"]


class MeApi(RetrieveAPIView):
    serializer_class = MeSerializer
    pagination_class = None
    filter_backends = []

    def get_object(self):
        return self.request.user


# -- workspaces and their members --------------------------------------------------------------------------------------


class WorkspaceSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField(help_text="The caller's role in the workspace (null: not a member).")

    class Meta:
        model = Workspace
        fields = ["slug", "name", "created_at", "role"]
        read_only_fields = ["created_at", "role"]
        extra_kwargs = {"slug": {"validators": []}, "name": {"required": False}}

    def get_role(self, workspace) -> str | None:
        return self.context.get("roles", {}).get(workspace.pk)


class WorkspaceListApi(ListCreateAPIView):
    """The workspaces the caller may work in (every one for a site administrator); site administrators create
    workspaces."""

    serializer_class = WorkspaceSerializer
    pagination_class = None
    filter_backends = []

    def get_queryset(self):
        return selectors.workspaces_for(user=self.request.user)

    def get_serializer_context(self):
        roles = dict(Membership.objects.filter(user_id=self.request.user.pk or 0).values_list("workspace_id", "role"))
        return {**super().get_serializer_context(), "roles": roles}

    def create(self, request, *args, **kwargs):
        if not request.user.is_site_admin:
            raise PermissionDenied("Only site administrators create workspaces.")
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        # A refused slug is a ValidationFailed, answered {field: [message]} with 400 by core's exception handler.
        workspace = services.workspace_create(
            slug=serializer.validated_data["slug"], name=serializer.validated_data.get("name", ""), actor=request.user
        )
        return Response(self.get_serializer(workspace).data, status=201)


class MemberSerializer(serializers.Serializer):
    username = serializers.CharField(max_length=150)
    role = serializers.ChoiceField(choices=Role.choices, required=False)


def _administered(request, slug: str) -> Workspace:
    """The workspace `slug` if the caller manages its members; 404 when it is not theirs to see, 403 when they are
    a member without the admin role there."""
    workspace = selectors.workspaces_for(user=request.user).filter(slug=slug).first()
    if workspace is None:
        raise NotFound("No such workspace.")
    if not selectors.workspaces_administered(user=request.user).filter(pk=workspace.pk).exists():
        raise PermissionDenied("Only the workspace's admins manage its members.")
    return workspace


class WorkspaceMembersApi(APIView):
    """A workspace's members and their roles: GET lists, POST `{"username", "role"}` adds a member or changes a
    role, DELETE `{"username"}` (or `?username=`) removes one. Workspace admins and site administrators."""

    serializer_class = MemberSerializer

    def _user(self, username: str) -> User:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise ValidationError({"username": [f"No user {username!r}."]})
        return user

    @extend_schema(responses=MemberSerializer(many=True))
    def get(self, request, slug: str):
        workspace = _administered(request, slug)
        members = selectors.workspace_members(workspace=workspace)
        return Response([{"username": m.user.username, "role": m.role} for m in members])

    @extend_schema(request=MemberSerializer, responses=MemberSerializer)
    def post(self, request, slug: str):
        workspace = _administered(request, slug)
        serializer = MemberSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        if "role" not in serializer.validated_data:
            raise ValidationError({"role": ["This field is required."]})
        user = self._user(serializer.validated_data["username"])
        services.membership_set(
            workspace=workspace, user=user, role=serializer.validated_data["role"], actor=request.user
        )
        return Response({"username": user.username, "role": serializer.validated_data["role"]}, status=200)

    @extend_schema(request=MemberSerializer, responses={204: None}, parameters=[OpenApiParameter("username", str)])
    def delete(self, request, slug: str):
        workspace = _administered(request, slug)
        username = request.data.get("username") if isinstance(request.data, dict) else None
        username = username or request.query_params.get("username", "")
        user = self._user(str(username))
        if not services.membership_remove(workspace=workspace, user=user, actor=request.user):
            raise NotFound(f"{user.username} is not a member of {workspace.slug}.")
        return Response(status=204)
