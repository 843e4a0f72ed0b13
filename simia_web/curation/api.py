"""REST endpoints of trajectories: summaries in lists; messages, verdicts, reviews and violations in detail."""

from django.db.models import Prefetch
from rest_framework import serializers, viewsets

from simia_web.catalog.selectors import with_domain_named

from .filters import TrajectoryFilter
from .models import JudgeVerdict, Review, RuleViolation, Trajectory

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
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)

    class Meta:
        model = Review
        fields = ["id", "reviewer", "decision", "reason", "trajectory_version", "created_at"]


class TrajectorySummarySerializer(serializers.ModelSerializer):
    domain = serializers.SlugRelatedField(slug_field="name", read_only=True)

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

    class Meta(TrajectorySummarySerializer.Meta):
        fields = [
            *TrajectorySummarySerializer.Meta.fields,
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


class TrajectoryViewSet(viewsets.ReadOnlyModelViewSet):
    """Filters: domain, job, task, seed, status (comma-separated or `all`), kind, judge_passed,
    min_score/max_score, violation (an unfixed rule code) and q (text in the messages)."""

    filterset_class = TrajectoryFilter

    def get_serializer_class(self):
        return TrajectorySummarySerializer if self.action == "list" else TrajectoryDetailSerializer

    def get_queryset(self):
        qs = Trajectory.objects.select_related("domain")
        if self.action == "list":
            return with_domain_named(qs).defer(*HEAVY_FIELDS)
        return qs.prefetch_related(
            "verdicts", "violations", Prefetch("reviews", queryset=Review.objects.select_related("reviewer"))
        )
