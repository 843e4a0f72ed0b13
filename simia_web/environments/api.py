"""REST endpoints of the RL environment: reset (create a session), step, abandon, session state and list."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response
from rest_framework.views import APIView

from simia_web.accounts.permissions import IsCurator
from simia_web.accounts.rest import WORKSPACE_PARAMETER, request_workspace_ids
from simia_web.accounts.scoping import api_workspace_ids
from simia_web.core.pagination import IdCursorPagination

from . import selectors, services
from .filters import EnvSessionFilter
from .models import EnvSession


class EnvCreateSerializer(serializers.Serializer):
    task = serializers.IntegerField(required=False, min_value=1, max_value=2**63 - 1, help_text="Play this task.")
    domain = serializers.CharField(required=False, max_length=80, help_text="Sample a valid task of this domain.")
    workspace = serializers.SlugField(
        required=False, max_length=50, help_text="Look the task, domain or group up in this workspace only."
    )
    seed = serializers.IntegerField(required=False, help_text="Random seed for the task sample (reproducible).")
    group = serializers.CharField(
        required=False, max_length=120, help_text="Group key: every session of a group plays the same task."
    )
    max_steps = serializers.IntegerField(required=False, min_value=1, max_value=services.LIMIT_RANGES["max_steps"][1])
    max_errors = serializers.IntegerField(required=False, min_value=1, max_value=services.LIMIT_RANGES["max_errors"][1])
    token_budget = serializers.IntegerField(
        required=False, min_value=1, max_value=services.LIMIT_RANGES["token_budget"][1]
    )
    max_tool_calls_per_step = serializers.IntegerField(
        required=False,
        min_value=1,
        max_value=services.LIMIT_RANGES["max_tool_calls_per_step"][1],
        help_text="Tool calls one agent message may make; a message with more is refused (400).",
    )


class EnvOpeningSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    observation = serializers.ListField(child=serializers.DictField(), help_text="Messages to append (the user).")
    tools = serializers.ListField(child=serializers.DictField(), help_text="OpenAI function tools.")
    system = serializers.CharField(help_text="System prompt with the domain policy.")
    task = serializers.IntegerField()
    domain = serializers.CharField()
    group = serializers.CharField(allow_null=True)
    limits = serializers.DictField(child=serializers.IntegerField())


class EnvStepResultSerializer(serializers.Serializer):
    observation = serializers.ListField(
        child=serializers.DictField(), help_text="Messages to append: tool results or the user's reply."
    )
    done = serializers.BooleanField()
    reward = serializers.FloatField(
        allow_null=True, help_text="Judge reward 0..1 once done; null while running, when abandoned or unjudged."
    )
    termination_reason = serializers.CharField(allow_null=True)
    info = serializers.DictField()


class EnvSessionSummarySerializer(serializers.Serializer):
    id = serializers.UUIDField()
    task = serializers.IntegerField(source="task_id")
    domain = serializers.CharField(source="domain.name")
    group = serializers.CharField(source="group.key", allow_null=True, default=None)
    done = serializers.BooleanField()
    reward = serializers.FloatField(allow_null=True)
    termination_reason = serializers.SerializerMethodField()
    steps = serializers.IntegerField(source="step_count")
    created_at = serializers.DateTimeField()

    def get_termination_reason(self, session) -> str | None:
        return session.termination_reason or None


class EnvSessionSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    task = serializers.IntegerField(source="task_id")
    domain = serializers.CharField(source="domain.name")
    group = serializers.CharField(source="group.key", allow_null=True, default=None)
    done = serializers.BooleanField()
    reward = serializers.FloatField(allow_null=True)
    reward_breakdown = serializers.DictField()
    termination_reason = serializers.SerializerMethodField()
    steps = serializers.IntegerField(source="step_count")
    # The stubs type Serializer.errors (the validation errors); this read-only serializer's field is the session's.
    errors = serializers.IntegerField(source="error_count")  # type: ignore[assignment]
    tokens_used = serializers.IntegerField()
    messages = serializers.SerializerMethodField()
    limits = serializers.DictField(child=serializers.IntegerField())
    trajectory = serializers.IntegerField(source="trajectory_id", allow_null=True)
    created_at = serializers.DateTimeField()
    finished_at = serializers.DateTimeField(allow_null=True)

    def get_messages(self, session) -> int:
        return len(session.messages)

    def get_termination_reason(self, session) -> str | None:
        return session.termination_reason or None


ERROR = inline_serializer("EnvError", {"error": serializers.CharField(), "detail": serializers.CharField()})


class SessionCursorPagination(IdCursorPagination):
    # Session ids are random UUIDs: newest first by creation time instead.
    ordering = "-created_at"


class EnvListCreateApi(GenericAPIView):
    permission_classes = [IsCurator]
    serializer_class = EnvSessionSummarySerializer
    filterset_class = EnvSessionFilter
    pagination_class = SessionCursorPagination

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return EnvSession.objects.none()
        return selectors.sessions_list(actor=self.request.user, workspace_ids=request_workspace_ids(self.request))

    @extend_schema(
        parameters=[WORKSPACE_PARAMETER],
        responses={
            200: EnvSessionSummarySerializer(many=True),
            400: OpenApiResponse(OpenApiTypes.OBJECT, "Invalid filter: {parameter: [messages]}."),
            404: OpenApiResponse(OpenApiTypes.OBJECT, "Invalid pagination cursor."),
        },
        summary="List sessions of your workspaces: your own (in a workspace you administer: all), newest first",
    )
    def get(self, request):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        return self.get_paginated_response(EnvSessionSummarySerializer(page, many=True).data)

    @extend_schema(
        request=EnvCreateSerializer,
        responses={201: EnvOpeningSerializer, 400: ERROR, 429: ERROR, 502: ERROR},
        summary="Reset: start an episode on a task",
    )
    def post(self, request):
        serializer = EnvCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        session = services.env_create(
            actor=request.user,
            task_id=data.get("task"),
            domain_name=data.get("domain"),
            seed=data.get("seed"),
            group_key=data.get("group", ""),
            max_steps=data.get("max_steps"),
            max_errors=data.get("max_errors"),
            token_budget=data.get("token_budget"),
            max_tool_calls_per_step=data.get("max_tool_calls_per_step"),
            workspace_ids=api_workspace_ids(request.user, data.get("workspace")),
        )
        return Response(services.session_opening(session=session), status=status.HTTP_201_CREATED)


class EnvDetailApi(APIView):
    permission_classes = [IsCurator]

    @extend_schema(responses={200: EnvSessionSerializer, 404: ERROR}, summary="State of a session")
    def get(self, request, session_id):
        sessions = selectors.sessions_visible(actor=request.user, workspace_ids=request_workspace_ids(request))
        session = sessions.filter(pk=session_id).first()
        if session is None:
            raise services.EnvNotFound(f"no environment session {session_id}")
        return Response(EnvSessionSerializer(session).data)


class EnvStepApi(APIView):
    permission_classes = [IsCurator]

    @extend_schema(
        request=inline_serializer("EnvStep", {"message": serializers.DictField(help_text="Assistant message.")}),
        responses={200: EnvStepResultSerializer, 400: ERROR, 404: ERROR, 409: ERROR},
        summary="Step: send one assistant message",
    )
    def post(self, request, session_id):
        return Response(
            services.env_step(
                session_id=session_id,
                actor=request.user,
                payload=request.data,
                workspace_ids=request_workspace_ids(request),
            )
        )


class EnvAbandonApi(APIView):
    permission_classes = [IsCurator]

    @extend_schema(
        request=None,
        responses={200: EnvStepResultSerializer, 404: ERROR, 409: ERROR},
        summary="Abandon: end an unfinished episode without a reward",
    )
    def post(self, request, session_id):
        return Response(
            services.env_abandon(
                session_id=session_id, actor=request.user, workspace_ids=request_workspace_ids(request)
            )
        )
