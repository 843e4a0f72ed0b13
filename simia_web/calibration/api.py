"""REST endpoints of calibration: ratings (read; write your own), assignments (curators hand items out; each
annotator reads their own), runs with their figures, and agreement between annotators. A run is queued like any
job: POST /api/v1/jobs/ with kind "calibrate".

Reads see every workspace the caller belongs to, or the one `?workspace=SLUG` names; another workspace's rating,
assignment or run is not found (404). A rating needs the annotator role in its trajectory's workspace, handing items
out the curator role in the workspace they are handed out in."""

from django.db.models import F, Q
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.models import Role
from simia_web.accounts.permissions import IsMember
from simia_web.accounts.rest import WORKSPACE_PARAMETER, request_workspace_ids, workspace_write_field
from simia_web.accounts.scoping import has_role_in, member_workspace_ids, role_require_in, scoped, workspace_for_write
from simia_web.core.errors import NotFound, ValidationFailed
from simia_web.curation.selectors.people import workspace_people
from simia_web.curation.selectors.trajectory import trajectories_in

from . import selectors
from .models import CalibrationRun, ConsensusRule, CriterionRating, ErrorType, RatingAssignment
from .services import assignments_create, rating_save


class MessageLabelSerializer(serializers.Serializer):
    message_index = serializers.IntegerField(min_value=0)
    error_types = serializers.ListField(child=serializers.ChoiceField(choices=ErrorType.choices), required=False)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=4000)


class MemberTrajectoryField(serializers.PrimaryKeyRelatedField):
    """A trajectory of one of the caller's workspaces: another workspace's is no such trajectory."""

    def get_queryset(self):
        request = self.context.get("request")
        workspace_ids = member_workspace_ids(request.user) if request is not None else []
        trajectories = trajectories_in(workspace_ids=workspace_ids)
        return trajectories.annotate(owner_workspace=F("domain__workspace_id")).only("id")


class RatingSerializer(serializers.ModelSerializer):
    annotator: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    trajectory = MemberTrajectoryField()
    text_version = serializers.IntegerField(source="trajectory_version", min_value=1)
    scores = serializers.DictField(child=serializers.FloatField(min_value=0, max_value=1), allow_empty=False)
    messages = MessageLabelSerializer(many=True, required=False, source="message_labels")

    class Meta:
        model = CriterionRating
        fields = ["id", "trajectory", "annotator", "text_version", "scores", "comment", "messages", "updated_at"]
        read_only_fields = ["updated_at"]

    def to_representation(self, rating):
        data = super().to_representation(rating)
        data["messages"] = [
            {"message_index": m.message_index, "error_types": m.error_types, "comment": m.comment}
            for m in rating.message_labels.all()
        ]
        return data

    def create(self, validated_data):
        trajectory = validated_data["trajectory"]
        role_require_in(self.context["request"].user, trajectory.owner_workspace, Role.ANNOTATOR)
        return rating_save(
            trajectory_id=trajectory.pk,
            annotator=self.context["request"].user,
            text_version=validated_data["trajectory_version"],
            scores=validated_data["scores"],
            comment=validated_data.get("comment", ""),
            message_labels={m["message_index"]: m for m in validated_data.get("message_labels", [])},
        )


STALE_RATING = inline_serializer(
    "StaleRating",
    {
        "detail": serializers.CharField(),
        "code": serializers.CharField(),
        "text_version": serializers.IntegerField(help_text="The trajectory's text version now."),
    },
)


RATING_FILTERS = [
    WORKSPACE_PARAMETER,
    OpenApiParameter("trajectory", int, description="Only the ratings of this trajectory."),
    OpenApiParameter("current", bool, description="true: only ratings of each trajectory's current text."),
]


class RatingViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Ratings per judge criterion. POST saves yours for the text version named (409 when the text has changed
    since); `workspace`, `trajectory` and `current=true` narrow the list."""

    serializer_class = RatingSerializer
    permission_classes = [IsMember]
    queryset = CriterionRating.objects.none()  # the schema's model; get_queryset picks the rows

    @extend_schema(
        responses={201: RatingSerializer, 409: OpenApiResponse(STALE_RATING, "The text changed: nothing saved.")}
    )
    def create(self, request, *args, **kwargs):
        return super().create(request, *args, **kwargs)

    @extend_schema(parameters=RATING_FILTERS)
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def get_queryset(self):
        params = self.request.query_params
        workspace_ids = request_workspace_ids(self.request)
        if params.get("current") == "true":
            ratings = selectors.current_ratings(workspace_ids=workspace_ids)
        else:
            ratings = selectors.ratings_in(workspace_ids=workspace_ids)
        if (trajectory := params.get("trajectory", "")).isdigit():
            ratings = ratings.filter(trajectory_id=int(trajectory))
        return ratings.select_related("annotator").prefetch_related("message_labels").order_by("id")


class AssignmentSerializer(serializers.ModelSerializer):
    annotator: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = RatingAssignment
        fields = ["id", "batch", "trajectory", "annotator", "created_at"]


class AssignmentsMadeSerializer(serializers.Serializer):
    batch = serializers.IntegerField()
    items = serializers.IntegerField()
    assignments = serializers.IntegerField(help_text="New assignments (an item already held by someone counts).")
    gold = serializers.IntegerField(help_text="Gold items mixed in at the workspace's gold rate, among the new ones.")


class AssignmentCreateSerializer(serializers.Serializer):
    trajectories = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=10_000)
    annotators = serializers.ListField(child=serializers.CharField(max_length=150), min_length=1, max_length=200)
    overlap = serializers.IntegerField(min_value=1, max_value=20, help_text="Annotators per item (k).")
    consensus = serializers.ChoiceField(
        choices=ConsensusRule.values,
        default=ConsensusRule.NONE,
        help_text="How the k annotators' decisions decide each item: majority, unanimous or adjudicate (empty: "
        "each decision counts alone).",
    )
    workspace = workspace_write_field()


class AssignmentViewSet(viewsets.ReadOnlyModelViewSet):
    """Items handed to annotators: yours (curators of a workspace: everyone's there, `annotator` narrows). POST
    (curators) hands the trajectories given, of one workspace, to `overlap` of its annotators named, the least
    loaded first."""

    serializer_class = AssignmentSerializer
    permission_classes = [IsMember]
    queryset = RatingAssignment.objects.none()  # the schema's model; get_queryset picks the rows

    def get_queryset(self):
        user = self.request.user
        workspace_ids = request_workspace_ids(self.request)
        # Everyone's assignments in the workspaces where the caller is a curator, their own elsewhere.
        curated = [pk for pk in workspace_ids if has_role_in(user, pk, Role.CURATOR)]
        rows = scoped(RatingAssignment.objects.select_related("annotator"), workspace_ids).order_by("id")
        rows = rows.filter(Q(batch__workspace_id__in=curated) | Q(annotator_id=user.pk))
        name = self.request.query_params.get("annotator")
        return rows.filter(annotator__username=name[:150]) if name else rows

    @extend_schema(
        parameters=[
            WORKSPACE_PARAMETER,
            OpenApiParameter("annotator", str, description="Only this annotator's items (curators)."),
        ]
    )
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=AssignmentCreateSerializer, responses={201: AssignmentsMadeSerializer})
    def create(self, request):
        # The role in the workspace named is checked first: an annotator is refused whatever the body says.
        slug = request.data.get("workspace") if isinstance(request.data, dict) else None
        workspace = workspace_for_write(request.user, slug if isinstance(slug, str) else None, role=Role.CURATOR)
        body = AssignmentCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        names = body.validated_data["annotators"]
        people = list(workspace_people(workspace_ids=[workspace.pk]).filter(username__in=names))
        if missing := sorted(set(names) - {p.username for p in people}):
            raise ValidationFailed(f"no active member of {workspace.slug} named {', '.join(missing)}", "annotators")
        found = sorted(set(body.validated_data["trajectories"]))
        made = assignments_create(
            trajectory_ids=found,
            annotators=people,
            overlap=body.validated_data["overlap"],
            consensus=body.validated_data["consensus"],
            actor=request.user,
            selection={"ids": found},
            workspace=workspace,
        )
        return Response(made, status=status.HTTP_201_CREATED)


class SplitCriterionSerializer(serializers.Serializer):
    criterion = serializers.CharField()
    judge = serializers.FloatField()
    people = serializers.FloatField(help_text="The mean of people's ratings.")


class DisagreementSerializer(serializers.Serializer):
    trajectory = serializers.IntegerField()
    criteria = SplitCriterionSerializer(many=True)


class CriterionAlphaSerializer(serializers.Serializer):
    alpha = serializers.FloatField(allow_null=True, help_text="Krippendorff's alpha (interval); null: undefined.")
    items = serializers.IntegerField()


class InterAnnotatorSerializer(serializers.Serializer):
    annotators = serializers.IntegerField()
    items = serializers.IntegerField()
    overlapping_items = serializers.IntegerField(help_text="Items rated by two or more people.")
    criteria = serializers.DictField(child=CriterionAlphaSerializer())


class CalibrationRunSerializer(serializers.ModelSerializer):
    class Meta:
        model = CalibrationRun
        fields = ["id", "prompt_version", "profile", "profile_name", "job", "summary", "created_at", "finished_at"]


class CalibrationRunViewSet(viewsets.ReadOnlyModelViewSet):
    """Calibration runs and their figures per criterion; `best` is the best-calibrated configuration's run and
    `agreement` the agreement between annotators (of the workspaces read: yours, or `?workspace=`)."""

    serializer_class = CalibrationRunSerializer
    permission_classes = [IsMember]
    queryset = CalibrationRun.objects.none()  # the schema's model; get_queryset picks the rows

    def get_queryset(self):
        return selectors.runs_in(workspace_ids=request_workspace_ids(self.request))

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(responses=DisagreementSerializer(many=True))
    @action(detail=True)
    def disagreements(self, request, pk=None):
        """The items where the judge and the people fell on different sides of the threshold when the run ended
        (the first 100, most criteria first)."""
        return Response((self.get_object().summary or {}).get("disagreements", []))

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    @action(detail=False)
    def best(self, request):
        run = selectors.best_calibrated(workspace_ids=request_workspace_ids(request))
        if run is None:
            raise NotFound("No calibration run has finished.")
        return Response(self.get_serializer(run).data)

    @extend_schema(responses=InterAnnotatorSerializer, parameters=[WORKSPACE_PARAMETER])
    @action(detail=False)
    def agreement(self, request):
        return Response(selectors.inter_annotator_agreement(workspace_ids=request_workspace_ids(request)))
