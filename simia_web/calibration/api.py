"""REST endpoints of calibration: ratings (read; write your own), assignments (curators hand items out; each
annotator reads their own), runs with their figures, and agreement between annotators. A run is queued like any
job: POST /api/v1/jobs/ with kind "calibrate"."""

from django.contrib.auth import get_user_model
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.models import Role
from simia_web.accounts.permissions import IsMember, user_has_role
from simia_web.core.errors import NotFound, ValidationFailed
from simia_web.curation.models import Trajectory

from . import selectors
from .models import CalibrationRun, CriterionRating, ErrorType, RatingAssignment
from .services import assignments_create, rating_save


class MessageLabelSerializer(serializers.Serializer):
    message_index = serializers.IntegerField(min_value=0)
    error_types = serializers.ListField(child=serializers.ChoiceField(choices=ErrorType.choices), required=False)
    comment = serializers.CharField(required=False, allow_blank=True, max_length=4000)


class RatingSerializer(serializers.ModelSerializer):
    annotator: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    trajectory = serializers.PrimaryKeyRelatedField(queryset=Trajectory.objects.only("id"))
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
        return rating_save(
            trajectory_id=validated_data["trajectory"].pk,
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


class RatingViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Ratings per judge criterion. POST saves yours for the text version named (409 when the text has changed
    since); `trajectory` and `current=true` narrow the list."""

    serializer_class = RatingSerializer
    permission_classes = [IsMember]

    @extend_schema(
        responses={201: RatingSerializer, 409: OpenApiResponse(STALE_RATING, "The text changed: nothing saved.")}
    )
    def create(self, request, *args, **kwargs):
        return super().create(request, *args, **kwargs)

    def get_queryset(self):
        params = self.request.query_params
        ratings = selectors.current_ratings() if params.get("current") == "true" else CriterionRating.objects.all()
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


class AssignmentCreateSerializer(serializers.Serializer):
    trajectories = serializers.ListField(child=serializers.IntegerField(min_value=1), min_length=1, max_length=10_000)
    annotators = serializers.ListField(child=serializers.CharField(max_length=150), min_length=1, max_length=200)
    overlap = serializers.IntegerField(min_value=1, max_value=20, help_text="Annotators per item (k).")


class AssignmentViewSet(viewsets.ReadOnlyModelViewSet):
    """Items handed to annotators: yours (curators: everyone's, `annotator` narrows). POST (curators) hands the
    trajectories given to `overlap` of the annotators named, the least loaded first."""

    serializer_class = AssignmentSerializer
    permission_classes = [IsMember]
    queryset = RatingAssignment.objects.none()  # the schema's model; get_queryset picks the rows

    def get_queryset(self):
        rows = RatingAssignment.objects.select_related("annotator").order_by("id")
        if not user_has_role(self.request.user, Role.CURATOR):
            return rows.filter(annotator_id=self.request.user.pk)
        name = self.request.query_params.get("annotator")
        return rows.filter(annotator__username=name[:150]) if name else rows

    @extend_schema(request=AssignmentCreateSerializer, responses={201: AssignmentsMadeSerializer})
    def create(self, request):
        if not user_has_role(request.user, Role.CURATOR):
            self.permission_denied(request, message="Handing items out needs the curator role.")
        body = AssignmentCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        names = body.validated_data["annotators"]
        people = list(get_user_model().objects.filter(username__in=names, is_active=True))
        if missing := sorted(set(names) - {p.username for p in people}):
            raise ValidationFailed(f"no active user named {', '.join(missing)}", "annotators")
        ids = sorted(set(body.validated_data["trajectories"]))
        found = list(Trajectory.objects.filter(pk__in=ids).values_list("id", flat=True).order_by("id"))
        if missing := sorted(set(ids) - set(found)):
            raise ValidationFailed(f"no trajectory with id {', '.join(map(str, missing[:20]))}", "trajectories")
        made = assignments_create(
            trajectory_ids=found,
            annotators=people,
            overlap=body.validated_data["overlap"],
            actor=request.user,
            selection={"ids": found},
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
    `agreement` the agreement between annotators."""

    serializer_class = CalibrationRunSerializer
    permission_classes = [IsMember]
    queryset = CalibrationRun.objects.order_by("-id")

    @extend_schema(responses=DisagreementSerializer(many=True))
    @action(detail=True)
    def disagreements(self, request, pk=None):
        """The items where the judge and the people fell on different sides of the threshold when the run ended
        (the first 100, most criteria first)."""
        return Response((self.get_object().summary or {}).get("disagreements", []))

    @action(detail=False)
    def best(self, request):
        run = selectors.best_calibrated()
        if run is None:
            raise NotFound("No calibration run has finished.")
        return Response(self.get_serializer(run).data)

    @extend_schema(responses=InterAnnotatorSerializer)
    @action(detail=False)
    def agreement(self, request):
        return Response(selectors.inter_annotator_agreement())
