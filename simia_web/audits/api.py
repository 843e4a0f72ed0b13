"""REST endpoints of audits: create one (curators), read its estimate, page through its sample, and accept the rest
of its population on its evidence (curators). Decisions on the items go through POST /trajectories/{id}/reviews/."""

from django.db.models import Exists, F, OuterRef
from drf_spectacular.utils import OpenApiResponse, extend_schema, inline_serializer
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.response import Response

from simia_web.accounts.permissions import ReadMemberWriteCurator
from simia_web.accounts.rest import WORKSPACE_PARAMETER, request_workspace_ids, workspace_write_field
from simia_web.accounts.scoping import workspace_for_write
from simia_web.core.pagination import IdCursorPagination
from simia_web.core.rest import ErrorSerializer
from simia_web.curation.models import Review

from .models import Audit, AuditItem, Strategy
from .selectors import AuditEstimate, audit_estimate, audits_list
from .services import SEED_MAX, audit_accept_rest, audit_create

REFUSED = OpenApiResponse(
    description="A field is wrong, named with its path: {field: [message]} (an unknown filter, a sample size "
    "below 1 or above the population, an unknown strategy, an empty population)."
)


class IntervalSerializer(serializers.Serializer):
    error_rate = serializers.FloatField(help_text="The estimated share of the population a person would reject.")
    low = serializers.FloatField()
    high = serializers.FloatField()
    confidence = serializers.FloatField(help_text="0.95: a 95% interval.")
    method = serializers.CharField()


class CriterionFiguresSerializer(serializers.Serializer):
    rated = serializers.IntegerField(help_text="Decided items people rated on this criterion.")
    estimate = IntervalSerializer(allow_null=True)
    human_only = IntervalSerializer(allow_null=True)
    judge_only = serializers.FloatField(help_text="The share of the population the judge fails on the criterion.")


class AuditSerializer(serializers.ModelSerializer):
    created_by: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="username", read_only=True)
    workspace: serializers.SlugRelatedField = serializers.SlugRelatedField(slug_field="slug", read_only=True)

    class Meta:
        model = Audit
        fields = [
            "id",
            "workspace",
            "population",
            "sample_size",
            "strategy",
            "seed",
            "blind",
            "filters",
            "created_by",
            "created_at",
        ]


class AuditDetailSerializer(AuditSerializer):
    decided = serializers.IntegerField(help_text="Sampled items a person has decided (their decision counts).")
    rejected = serializers.IntegerField(help_text="Of those, rejected or accepted only after a fix.")
    estimate = IntervalSerializer(
        allow_null=True,
        help_text="Prediction-powered: the judge over the population, corrected by people. Null "
        "until the first decision.",
    )
    human_only = IntervalSerializer(
        allow_null=True, help_text="Design-based, from people's decisions alone. Null until the first decision."
    )
    per_criterion = serializers.DictField(
        child=CriterionFiguresSerializer(), help_text="Per judge criterion, where people gave criterion ratings."
    )
    decisions_needed = serializers.IntegerField(
        allow_null=True, help_text="More decisions that would bring the estimate to ±2 points (null: none yet)."
    )
    judge_only = serializers.FloatField(help_text="The judge's own figure: its mean predicted rejection.")
    judge_failed = serializers.IntegerField(help_text="Members the judge failed at the freeze.")
    edited = serializers.IntegerField(help_text="Sampled members whose text changed after the freeze.")
    accepted_on_evidence = serializers.IntegerField(help_text="Decisions standing on this audit's evidence.")

    class Meta(AuditSerializer.Meta):
        fields = [
            *AuditSerializer.Meta.fields,
            "decided",
            "rejected",
            "estimate",
            "human_only",
            "per_criterion",
            "decisions_needed",
            "judge_only",
            "judge_failed",
            "edited",
            "accepted_on_evidence",
        ]


def audit_detail_data(audit: Audit, figures: AuditEstimate, accepted: int) -> dict:
    interval = AuditEstimate.interval_data
    return {
        **AuditSerializer(audit).data,
        "decided": figures.counted,
        "rejected": figures.rejected,
        "estimate": interval(figures.estimate),
        "human_only": interval(figures.human_only),
        "per_criterion": {
            name: {
                "rated": row["rated"],
                "estimate": interval(row["estimate"]),
                "human_only": interval(row["human_only"]),
                "judge_only": row["judge_only"],
            }
            for name, row in figures.per_criterion.items()
        },
        "decisions_needed": figures.needed,
        "judge_only": figures.judge_only,
        "judge_failed": audit.judge_failed,
        "edited": len(figures.edited),
        "accepted_on_evidence": accepted,
    }


class AuditCreateSerializer(serializers.Serializer):
    filters = serializers.DictField(
        required=False,
        default=dict,
        help_text="Trajectory filters as in GET /trajectories/ (domain, job, task, seed, status, kind, "
        "judge_passed, verdict, min_score, max_score, violation, q). The status defaults to `pending`, as in the "
        "review queue. Empty and errored conversations are never part of a population.",
    )
    sample_size = serializers.IntegerField(help_text="Items people will decide: at least 1, at most the population.")
    strategy = serializers.ChoiceField(
        choices=Strategy.choices,
        help_text="uniform: simple random sampling without replacement. active: members more likely to be rejected "
        "(the judge's score, confidence and criterion spread, rule violations, near-duplicates) are more likely "
        "drawn; every member's inclusion probability is above 0 and stored.",
    )
    seed = serializers.IntegerField(
        required=False, min_value=0, max_value=SEED_MAX, help_text="The draw's seed (default: a random one)."
    )
    blind = serializers.BooleanField(
        default=True, help_text="Hide the judge's verdict, scores and rationale on an item until it is decided."
    )
    workspace = workspace_write_field()


class AuditItemSerializer(serializers.ModelSerializer):
    id = serializers.IntegerField(source="trajectory_id", help_text="The trajectory's id.")
    decided = serializers.BooleanField(help_text="A person's decision counts for it.")
    text_version_now = serializers.IntegerField(help_text="The trajectory's text version now.")

    class Meta:
        model = AuditItem
        fields = ["id", "position", "decided", "inclusion_probability", "text_version", "text_version_now"]
        extra_kwargs = {
            "position": {"help_text": "Its place in the order items are given out (from 0)."},
            "text_version": {"help_text": "The text version at the freeze."},
        }


class PositionCursorPagination(IdCursorPagination):
    ordering = "position"


class AcceptRestSerializer(serializers.Serializer):
    max_error_rate = serializers.FloatField(
        min_value=0, max_value=1, help_text="The ceiling: refused while the estimate's upper bound is above it."
    )


ACCEPTANCE = inline_serializer(
    "AuditAcceptance",
    {
        "id": serializers.IntegerField(),
        "audit": serializers.IntegerField(),
        "max_error_rate": serializers.FloatField(),
        "high": serializers.FloatField(help_text="The estimate's upper bound it was allowed on."),
        "accepted": serializers.IntegerField(
            allow_null=True, help_text="Members accepted (null while its bulk-decision job runs)."
        ),
        "job": serializers.IntegerField(allow_null=True, help_text="The bulk-decision job, for a large population."),
        "batch": serializers.CharField(allow_null=True, help_text="The bulk decision's batch (its undo names it)."),
    },
)


class AuditViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    """Audits: a population of trajectories frozen at creation, a sample people decide, and the share of the
    population a person would reject, with 95% intervals. Members read; curators create and accept the rest."""

    permission_classes = [ReadMemberWriteCurator]
    serializer_class = AuditSerializer
    filter_backends: list = []

    def get_queryset(self):
        return audits_list(workspace_ids=request_workspace_ids(self.request))

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)

    @extend_schema(request=AuditCreateSerializer, responses={201: AuditSerializer, 400: REFUSED})
    def create(self, request, *args, **kwargs):
        body = AuditCreateSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        data = body.validated_data
        workspace = workspace_for_write(request.user, data.get("workspace"), role="curator")
        audit = audit_create(
            filters=data["filters"],
            sample_size=data["sample_size"],
            strategy=data["strategy"],
            seed=data.get("seed"),
            blind=data["blind"],
            actor=request.user,
            workspace_id=workspace.pk,
        )
        return Response(AuditSerializer(audit).data, status=status.HTTP_201_CREATED)

    @extend_schema(responses={200: AuditDetailSerializer, 404: ErrorSerializer})
    def retrieve(self, request, *args, **kwargs):
        audit = self.get_object()
        accepted = Review.objects.filter(audit=audit.pk, undone_at__isnull=True, superseded_at__isnull=True).count()
        return Response(audit_detail_data(audit, audit_estimate(audit), accepted))

    @extend_schema(responses={200: AuditItemSerializer(many=True), 404: ErrorSerializer})
    @action(detail=True, pagination_class=PositionCursorPagination)
    def items(self, request, pk=None):
        """The sample, in the order its items are given out (cursor-paged)."""
        audit = self.get_object()
        counted = Review.objects.filter(
            trajectory=OuterRef("trajectory_id"),
            bulk=False,
            undone_at__isnull=True,
            created_at__gte=audit.created_at,
        )
        rows = AuditItem.objects.filter(audit=audit).annotate(
            decided=Exists(counted), text_version_now=F("trajectory__text_version")
        )
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(AuditItemSerializer(page, many=True).data)

    @extend_schema(
        request=AcceptRestSerializer,
        responses={
            201: OpenApiResponse(ACCEPTANCE, "Accepted within the request."),
            202: OpenApiResponse(ACCEPTANCE, "Accepting in a bulk-decision job (`job`)."),
            400: OpenApiResponse(
                description="Refused: the upper bound is above the ceiling (named both), or no decision counts yet."
            ),
            404: ErrorSerializer,
        },
    )
    @action(detail=True, methods=["post"], url_path="accept-rest")
    def accept_rest(self, request, pk=None):
        """Accept every member nobody decided whose text is unchanged since the freeze, on the audit's evidence:
        refused while the estimate's upper bound is above `max_error_rate`. Each decision names the audit."""
        audit = self.get_object()
        body = AcceptRestSerializer(data=request.data)
        body.is_valid(raise_exception=True)
        acceptance = audit_accept_rest(
            audit=audit, max_error_rate=body.validated_data["max_error_rate"], actor=request.user
        )
        data = {
            "id": acceptance.pk,
            "audit": audit.pk,
            "max_error_rate": acceptance.max_error_rate,
            "high": acceptance.high,
            "accepted": acceptance.accepted,
            "job": acceptance.job_id,
            "batch": str(acceptance.batch) if acceptance.batch else None,
        }
        return Response(data, status=status.HTTP_202_ACCEPTED if acceptance.job_id else status.HTTP_201_CREATED)
