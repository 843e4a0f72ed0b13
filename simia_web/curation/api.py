"""REST endpoints of trajectories: summaries in lists; messages, verdicts, reviews and violations in detail; review
(accept, reject, fix) and revert through the same services and rules as the pages; gold items, which curators mark,
read and list (nobody else may learn an item is gold); annotators' quality.

Reads see the trajectories of every workspace the caller belongs to, or of the one `?workspace=SLUG` names; another
workspace's trajectory is not found (404), and a write needs the annotator role in the trajectory's workspace (the
curator role for anything of a gold item)."""

from django.db.models import F, Prefetch, Q
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response
from rest_framework.views import APIView

from simia_web.accounts.models import Role
from simia_web.accounts.permissions import IsMember
from simia_web.accounts.rest import WORKSPACE_PARAMETER, request_workspace_ids
from simia_web.accounts.scoping import has_role_in, role_require_in
from simia_web.catalog.selectors import with_domain_named
from simia_web.core.errors import Forbidden, NotFound

from .filters import TrajectoryFilter
from .models import (
    Decision,
    GoldItem,
    JudgeVerdict,
    Review,
    RuleViolation,
    Trajectory,
    TrajectoryChange,
)
from .selectors.gold import gold_items_in
from .selectors.people import workspace_people
from .selectors.quality import annotator_quality
from .selectors.trajectory import stages_hidden_from, standing_review, trajectories_in
from .services import gold_mark, gold_unmark, review_decide, trajectory_revert
from .services.gold import EXPLANATION_MAX

# Large JSON columns a list row never shows.
HEAVY_FIELDS = ("messages", "tools", "steps", "initial_state", "final_state", "provenance")


class RuleViolationSerializer(serializers.ModelSerializer):
    class Meta:
        model = RuleViolation
        fields = ["id", "code", "message_index", "detail", "fixed"]


class JudgeVerdictSerializer(serializers.ModelSerializer):
    class Meta:
        model = JudgeVerdict
        fields = [
            "id",
            "passed",
            "score",
            "confidence",
            "scores",
            "rationale",
            "cited_messages",
            "error",
            "profile",
            "model",
            "llm_call",
            "created_at",
        ]


class ReviewSerializer(serializers.ModelSerializer):
    reviewer: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    standing = serializers.BooleanField(
        read_only=True, help_text="Neither undone nor superseded: the trajectory is still at `trajectory_version`."
    )
    checked_by: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True, help_text="The reviewer who settled it (the reviewer stage)."
    )

    class Meta:
        model = Review
        fields = [
            "id",
            "reviewer",
            "decision",
            "reason",
            "based_on_version",
            "trajectory_version",
            "bulk",
            "standing",
            "stage",
            "checked_by",
            "checked_at",
            "check_reason",
            "guidelines_version",
            "undone_at",
            "superseded_at",
            "created_at",
        ]


class TrajectorySummarySerializer(serializers.ModelSerializer):
    domain: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="name", read_only=True)

    class Meta:
        model = Trajectory
        fields = [
            "id",
            "kind",
            "status",
            "domain",
            "task",
            "seed",
            "job",
            "judge_passed",
            "judge_score",
            "judge_confidence",
            "violation_count",
            "termination_reason",
            "reward",
            "version",
            "content_hash",
            "created_at",
            "updated_at",
        ]


class TrajectoryDetailSerializer(TrajectorySummarySerializer):
    verdicts = JudgeVerdictSerializer(many=True, read_only=True)
    reviews = ReviewSerializer(many=True, read_only=True)
    violations = RuleViolationSerializer(many=True, read_only=True)
    decision = serializers.SerializerMethodField(
        help_text="The decision that stands (made on `based_on_version`, it made `trajectory_version`), or null."
    )

    class Meta(TrajectorySummarySerializer.Meta):
        fields = [
            *TrajectorySummarySerializer.Meta.fields,
            "text_version",
            "decision",
            "seed_version",
            "unit",
            "messages",
            "tools",
            "steps",
            "initial_state",
            "final_state",
            "provenance",
            "verdicts",
            "reviews",
            "violations",
        ]

    @extend_schema_field(ReviewSerializer(allow_null=True))
    def get_decision(self, trajectory) -> dict | None:
        review = standing_review(trajectory.reviews.all())
        return ReviewSerializer(review).data if review else None


DECISIONS = {"accept": Decision.ACCEPT, "reject": Decision.REJECT, "fix": Decision.FIX_ACCEPT}
REQUESTED_DECISIONS = list(DECISIONS)


class ReviewRequestSerializer(serializers.Serializer):
    decision = serializers.ChoiceField(choices=REQUESTED_DECISIONS, help_text="fix: fix and accept.")
    version = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, help_text="The version you reviewed (`version` of GET): a stale one is 409."
    )
    reason = serializers.CharField(
        required=False, allow_blank=True, default="", max_length=2000, help_text="Required to reject."
    )
    messages = serializers.ListField(
        child=serializers.DictField(),
        required=False,
        help_text="fix only: the whole corrected conversation (OpenAI chat messages), checked as the editor checks it.",
    )

    def validate(self, data):
        if data["decision"] == "fix" and "messages" not in data:
            raise ValidationError({"messages": ["fix needs the corrected messages"]})
        if data["decision"] != "fix" and "messages" in data:
            raise ValidationError({"messages": ["only a fix sends messages"]})
        return data


class RevertRequestSerializer(serializers.Serializer):
    to_version = serializers.IntegerField(min_value=1, max_value=2**31 - 1, help_text="The version whose text returns.")
    version = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, help_text="The version you were looking at: a stale one is 409."
    )


class ReviewCreatedSerializer(ReviewSerializer):
    status = serializers.CharField(source="trajectory.status", help_text="The trajectory's status now.")
    version = serializers.IntegerField(
        source="trajectory.version", help_text="The trajectory's version now: name it in your next write."
    )

    class Meta(ReviewSerializer.Meta):
        fields = [*ReviewSerializer.Meta.fields, "status", "version"]


class TrajectoryVersionSerializer(serializers.ModelSerializer):
    class Meta:
        model = Trajectory
        fields = ["id", "version", "text_version", "status"]


class ChangeSerializer(serializers.ModelSerializer):
    actor: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = TrajectoryChange
        fields = ["version", "action", "detail", "actor", "created_at"]


class ConflictSerializer(serializers.Serializer):
    detail = serializers.CharField()
    code = serializers.ChoiceField(
        choices=["stale_version", "held"],
        help_text="stale_version: the trajectory changed after the version you named; held: someone is reviewing it.",
    )
    version = serializers.IntegerField(help_text="The trajectory's version now.")
    changes = ChangeSerializer(many=True, help_text="What changed after the version you named, and by whom.")


REFUSALS = {
    400: OpenApiResponse(description="A field is wrong, named with its path: {field: [messages]}."),
    409: OpenApiResponse(ConflictSerializer, "Refused: the version is stale, or someone else holds the item."),
}

EXPECTED_SCORES_HELP = (
    "Expected ratings, {criterion: grade}, of any of the judge's criteria (task_completed, tool_use_correct, "
    "simulator_consistent, policy_followed, final_answer_grounded), each 0 to 1 in tenths."
)


class GoldItemSerializer(serializers.ModelSerializer):
    domain = serializers.CharField(source="domain_name", read_only=True, help_text="The trajectory's domain.")
    expected_scores = serializers.DictField(child=serializers.FloatField(), help_text=EXPECTED_SCORES_HELP)
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(
        slug_field="username", read_only=True, help_text="The curator who marked it or changed it last."
    )

    class Meta:
        model = GoldItem
        fields = [
            "trajectory",
            "domain",
            "expected_decision",
            "expected_scores",
            "explanation",
            "created_by",
            "created_at",
            "updated_at",
        ]


class GoldWriteSerializer(serializers.Serializer):
    expected_decision = serializers.ChoiceField(choices=[Decision.ACCEPT, Decision.REJECT])
    expected_scores = serializers.DictField(
        child=serializers.FloatField(min_value=0, max_value=1),
        required=False,
        default=dict,
        help_text=f"{EXPECTED_SCORES_HELP} Left out: none.",
    )
    explanation = serializers.CharField(
        required=False,
        allow_blank=True,
        default="",
        max_length=EXPLANATION_MAX,
        help_text="Shown to an annotator once they have answered.",
    )


class TrajectoryViewSet(viewsets.ReadOnlyModelViewSet):
    """Filters: workspace (a slug), domain, job, task, seed, status (comma-separated or `all`), kind, judge_passed,
    min_score/max_score, violation (an unfixed rule code) and q (text in the messages)."""

    filterset_class = TrajectoryFilter
    queryset = Trajectory.objects.none()  # the schema's model; get_queryset picks the rows

    def get_serializer_class(self):
        return TrajectorySummarySerializer if self.action == "list" else TrajectoryDetailSerializer

    def get_queryset(self):
        trajectories = trajectories_in(workspace_ids=request_workspace_ids(self.request))
        if self.action == "list":
            return with_domain_named(trajectories).defer(*HEAVY_FIELDS)
        if self.action in ("reviews", "revert", "gold"):
            return trajectories.annotate(owner_workspace=F("domain__workspace_id"))
        return trajectories.select_related("domain").prefetch_related(
            "verdicts",
            "violations",
            # Other people's answers on a gold item and votes, as the item's page hides them (stages_hidden_from).
            Prefetch(
                "reviews",
                queryset=Review.objects.exclude(
                    Q(stage__in=stages_hidden_from(self.request.user))
                    & ~Q(reviewer_id=getattr(self.request.user, "pk", None))
                ).select_related("reviewer", "checked_by"),
            ),
        )

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    def _writable(self, role: str = Role.ANNOTATOR) -> Trajectory:
        """The trajectory the URL names, when the caller has `role` in its workspace (deciding it needs an
        annotator)."""
        trajectory = self.get_object()
        role_require_in(self.request.user, trajectory.owner_workspace, role)
        return trajectory

    @extend_schema(request=ReviewRequestSerializer, responses={201: ReviewCreatedSerializer, **REFUSALS})
    @action(detail=True, methods=["post"], filter_backends=[])
    def reviews(self, request, pk=None):
        """Accept, reject, or fix and accept the version you reviewed (same rules as the review pages: a decision
        never lands on an item someone else is reviewing, and fixed messages go through the editor's checks)."""
        trajectory = self._writable()
        body = ReviewRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        review = review_decide(
            trajectory=trajectory,
            reviewer=request.user,
            decision=DECISIONS[data["decision"]],
            expected_version=data["version"],
            reason=data["reason"],
            messages=data.get("messages"),
        )
        return Response(ReviewCreatedSerializer(review).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=RevertRequestSerializer, responses={200: TrajectoryVersionSerializer, **REFUSALS})
    @action(detail=True, methods=["post"], filter_backends=[])
    def revert(self, request, pk=None):
        """Make the text version `to_version` had the current text again, as the next version; the item waits for
        a decision again (the decision made on the text it replaces no longer stands)."""
        trajectory = self._writable()
        body = RevertRequestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        trajectory_revert(
            trajectory=trajectory,
            to_version=body.validated_data["to_version"],
            expected_version=body.validated_data["version"],
            actor=request.user,
        )
        return Response(TrajectoryVersionSerializer(trajectory).data)

    @extend_schema(methods=["GET"], responses={200: GoldItemSerializer})
    @extend_schema(methods=["PUT"], request=GoldWriteSerializer, responses={200: GoldItemSerializer})
    @extend_schema(methods=["DELETE"], responses={204: None})
    @action(detail=True, methods=["get", "put", "delete"], filter_backends=[])
    def gold(self, request, pk=None):
        """The trajectory as a gold item, for curators of its workspace only (403 for anyone else there: an
        expected answer must never reach an annotator before they answer). GET reads it, PUT marks it or changes
        its expected answer, expected ratings and explanation, DELETE unmarks it (the answers given on it stay, as
        history); GET and DELETE of a trajectory that is no gold item are 404."""
        trajectory = self._writable(Role.CURATOR)
        if request.method == "PUT":
            body = GoldWriteSerializer(data=request.data)
            body.is_valid(raise_exception=True)
            gold_mark(trajectory=trajectory, actor=request.user, **body.validated_data)
        elif request.method == "DELETE":
            if not gold_unmark(trajectory=trajectory, actor=request.user):
                raise NotFound("This trajectory is no gold item.")
            return Response(status=status.HTTP_204_NO_CONTENT)
        gold = gold_items_in(workspace_ids=request_workspace_ids(request)).filter(trajectory=trajectory).first()
        if gold is None:
            raise NotFound("This trajectory is no gold item.")
        return Response(GoldItemSerializer(gold).data)


class GoldItemViewSet(mixins.ListModelMixin, viewsets.GenericViewSet):
    """Gold items of the workspaces where the caller is a curator (or of the one `?workspace=` names), the latest
    marked first. Nobody below the curator role may list them (403)."""

    serializer_class = GoldItemSerializer
    queryset = GoldItem.objects.none()  # the schema's model; get_queryset picks the rows

    def _curated_workspace_ids(self) -> list[int]:
        user = self.request.user
        curated = [w for w in request_workspace_ids(self.request) if has_role_in(user, w, Role.CURATOR)]
        if not curated:
            raise Forbidden("Curators read gold items.")
        return curated

    def get_queryset(self):
        return gold_items_in(workspace_ids=self._curated_workspace_ids())

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)


class GoldQualitySerializer(serializers.Serializer):
    answered = serializers.IntegerField(help_text="Gold items answered (the first answer on each counts).")
    correct = serializers.IntegerField()
    accuracy = serializers.FloatField(allow_null=True)
    interval95 = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="The 95% Wilson interval of the accuracy."
    )
    trend = serializers.ListField(
        child=serializers.FloatField(), help_text="Accuracy per block of `trend_block` answers, oldest first."
    )
    trend_block = serializers.IntegerField()


class ReviewerAgreementSerializer(serializers.Serializer):
    settled = serializers.IntegerField(help_text="The annotator's decisions reviewers settled.")
    overturned = serializers.IntegerField()
    overturn_rate = serializers.FloatField(allow_null=True)


class PeerAgreementSerializer(serializers.Serializer):
    items = serializers.IntegerField(
        help_text="Item versions the annotator and someone else answered (gold answers and consensus votes)."
    )
    pairs = serializers.IntegerField(help_text="Pairs of first answers (the annotator's, another's) on them.")
    agreed = serializers.IntegerField(help_text="Pairs that agree: both reject, or neither.")
    agreement = serializers.FloatField(allow_null=True)
    interval95 = serializers.ListField(
        child=serializers.FloatField(), allow_null=True, help_text="The 95% Wilson interval of the agreement."
    )


class AnnotatorQualitySerializer(serializers.Serializer):
    annotator = serializers.CharField()
    gold = GoldQualitySerializer()
    reviewers = ReviewerAgreementSerializer()
    annotators = PeerAgreementSerializer(help_text="Agreement with other annotators.")


class AnnotatorQualityView(APIView):
    """An annotator's accuracy on gold items (with its 95% interval and trend), agreement with reviewers and with other
    annotators, over the caller's workspaces (or `?workspace=`): their own for anyone, anyone's for a curator of those
    workspaces. Someone of no workspace of the caller's is not found."""

    permission_classes = [IsMember]

    @extend_schema(
        parameters=[
            WORKSPACE_PARAMETER,
            OpenApiParameter("pk", int, OpenApiParameter.PATH, description="The user's id."),
        ],
        responses={200: AnnotatorQualitySerializer},
    )
    def get(self, request, pk: str):
        # The route takes any text, so that an id that is not one gets this API's JSON 404 (not the site's page).
        workspace_ids = request_workspace_ids(request)
        person = workspace_people(workspace_ids=workspace_ids).filter(pk=int(pk)).first() if pk.isdigit() else None
        if person is None:
            raise NotFound("No member of your workspaces matches.")
        if person.pk != request.user.pk:
            workspace_ids = [w for w in workspace_ids if has_role_in(request.user, w, Role.CURATOR)]
            if not workspace_ids:
                raise Forbidden("Curators read other people's quality.")
        quality = annotator_quality(annotator_id=person.pk, workspace_ids=workspace_ids)
        return Response({"annotator": person.username, **quality.as_dict()})
