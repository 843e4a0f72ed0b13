"""REST endpoints of jobs: list and inspect with progress, queue synthesis/rollout/amplification, cancel."""

from collections import defaultdict

from django.core.exceptions import ValidationError as DjangoValidationError
from django.db.models import Count
from drf_spectacular.utils import OpenApiResponse, PolymorphicProxySerializer, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import ValidationError
from rest_framework.response import Response

from simia_web.accounts.api import ApiAutoSchema, ErrorSerializer
from simia_web.accounts.permissions import ReadMemberWriteCurator
from simia_web.synthesis.amplify import MAX_COUNT, STRATEGIES, amplification_queue
from simia_web.synthesis.services import LIMITS, rollout_queue, synthesis_queue

from .filters import JobFilter
from .models import Job, JobKind, JobUnit
from .selectors import job_progress, job_usage
from .services import JobError, job_cancel


def drf_validation_error(exc: DjangoValidationError) -> ValidationError:
    """A service's ValidationError as a 400 answer with the same field names."""
    if hasattr(exc, "error_dict"):
        return ValidationError(exc.message_dict)
    return ValidationError({"detail": exc.messages})


class JobSummarySerializer(serializers.ModelSerializer):
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    progress = serializers.SerializerMethodField(help_text="{stage: {total, pending, done, failed, cancelled}}")

    class Meta:
        model = Job
        fields = [
            "id",
            "kind",
            "status",
            "stage",
            "params",
            "error",
            "created_by",
            "created_at",
            "started_at",
            "finished_at",
            "progress",
        ]

    def get_progress(self, job) -> dict[str, dict[str, int]]:
        progress = self.context.get("progress")
        return progress.get(job.pk, {}) if progress is not None else job_progress(job)


class JobUsageSerializer(serializers.Serializer):
    llm_calls = serializers.IntegerField()
    tokens_in = serializers.IntegerField()
    tokens_out = serializers.IntegerField()
    cost = serializers.FloatField()
    llm_errors = serializers.DictField(child=serializers.IntegerField())


class JobDetailSerializer(JobSummarySerializer):
    usage = serializers.SerializerMethodField()
    snapshot = serializers.SerializerMethodField(help_text="The snapshot an export job builds.")

    class Meta(JobSummarySerializer.Meta):
        fields = [*JobSummarySerializer.Meta.fields, "summary", "usage", "snapshot"]

    @extend_schema_field(JobUsageSerializer)
    def get_usage(self, job) -> dict:
        return job_usage(job)

    def get_snapshot(self, job) -> int | None:
        snapshot = getattr(job, "snapshot", None) if job.kind == JobKind.EXPORT else None
        return snapshot.pk if snapshot else None


def _bounded(name: str, default: int | None = None, **kwargs) -> serializers.IntegerField:
    low, high = LIMITS[name]
    if default is not None:
        kwargs["default"] = default
    return serializers.IntegerField(required=False, min_value=low, max_value=high, **kwargs)


class _RunLimitsSerializer(serializers.Serializer):
    max_steps = _bounded("max_steps", 12, help_text="Agent steps per rollout.")
    max_errors = _bounded("max_errors", 3, help_text="Tool errors before a rollout stops.")
    user_turns = _bounded("user_turns", 0, help_text="Extra turns by the simulated user.")


class SynthesizeJobSerializer(_RunLimitsSerializer):
    """`synthesize`: domains → APIs → tasks → rollouts (the `synthesize` command)."""

    kind = serializers.ChoiceField(choices=[JobKind.SYNTHESIZE.value])
    domains = serializers.ListField(
        child=serializers.SlugField(max_length=80), min_length=1, help_text="Domain names to synthesize."
    )
    apis = _bounded("apis", 8, help_text="APIs per domain.")
    tasks = _bounded("tasks", 10, help_text="Tasks per domain.")
    rollouts = _bounded("rollouts", 1, help_text="Rollouts per task.")


class RolloutJobSerializer(_RunLimitsSerializer):
    """`rollout`: more rollouts on a domain's valid tasks (the `rollout` command)."""

    kind = serializers.ChoiceField(choices=[JobKind.ROLLOUT.value])
    domain = serializers.SlugField(max_length=80, help_text="An existing domain.")
    tasks = _bounded("tasks", allow_null=True, help_text="Only the first N valid tasks (default: all).")
    rollouts = _bounded("rollouts", 1, help_text="Rollouts per task.")


class AmplifyJobSerializer(serializers.Serializer):
    """`amplify`: new trajectories written from usable seeds (the `amplify` command)."""

    kind = serializers.ChoiceField(choices=[JobKind.AMPLIFY.value])
    count = serializers.IntegerField(min_value=1, max_value=MAX_COUNT, help_text="Trajectories to write.")
    domain = serializers.SlugField(required=False, max_length=80, help_text="Only seeds of this domain.")
    seed_ids = serializers.ListField(
        child=serializers.IntegerField(min_value=1, max_value=2**63 - 1), required=False, help_text="Only these seeds."
    )
    strategy = serializers.ChoiceField(choices=STRATEGIES, default="round_robin")
    rng_seed = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=2**63 - 1, help_text="Seed of the random choice."
    )


JOB_REQUESTS = {
    JobKind.SYNTHESIZE: SynthesizeJobSerializer,
    JobKind.ROLLOUT: RolloutJobSerializer,
    JobKind.AMPLIFY: AmplifyJobSerializer,
}
JobCreateRequest = PolymorphicProxySerializer(
    component_name="JobCreate", serializers=list(JOB_REQUESTS.values()), resource_type_field_name="kind"
)


def job_request_validate(data) -> dict:
    kind = data.get("kind") if hasattr(data, "get") else None
    if not isinstance(kind, str) or kind not in JOB_REQUESTS:
        raise ValidationError({"kind": [f"choose one of {', '.join(JOB_REQUESTS)}"]})
    form = JOB_REQUESTS[kind](data=data)
    form.is_valid(raise_exception=True)
    return form.validated_data


def job_queue_from_request(data: dict, actor) -> Job:
    """Call the queueing service of the kind with the parameters it takes (the same as the CLI)."""
    kind = data["kind"]
    if kind == JobKind.AMPLIFY:
        return amplification_queue(
            count=data["count"],
            domain=data.get("domain") or None,
            seed_ids=data.get("seed_ids") or None,
            strategy=data["strategy"],
            rng_seed=data.get("rng_seed"),
            actor=actor,
        )
    run = {k: data[k] for k in ("max_steps", "max_errors", "user_turns")}
    if kind == JobKind.SYNTHESIZE:
        return synthesis_queue(
            domains=data["domains"],
            apis=data["apis"],
            tasks=data["tasks"],
            rollouts=data["rollouts"],
            actor=actor,
            **run,
        )
    return rollout_queue(domain=data["domain"], rollouts=data["rollouts"], tasks=data.get("tasks"), actor=actor, **run)


def progress_by_job(jobs: list[Job]) -> dict[int, dict]:
    """job_progress for a page of jobs in one query."""
    rows = (
        JobUnit.objects.filter(job__in=jobs)
        .values("job_id", "stage", "status")
        .annotate(n=Count("id"))
        .order_by("job_id", "stage")
    )
    progress: dict[int, dict] = defaultdict(dict)
    for row in rows:
        stage = progress[row["job_id"]].setdefault(
            row["stage"], {"total": 0, "pending": 0, "done": 0, "failed": 0, "cancelled": 0}
        )
        stage[row["status"]] += row["n"]
        stage["total"] += row["n"]
    return progress


class JobViewSet(mixins.CreateModelMixin, viewsets.ReadOnlyModelViewSet):
    schema = ApiAutoSchema()
    permission_classes = [ReadMemberWriteCurator]
    filterset_class = JobFilter
    queryset = Job.objects.select_related("created_by", "snapshot")

    def get_serializer_class(self):
        return JobSummarySerializer if self.action == "list" else JobDetailSerializer

    def list(self, request, *args, **kwargs):
        page = self.paginate_queryset(self.filter_queryset(self.get_queryset()))
        context = {**self.get_serializer_context(), "progress": progress_by_job(page)}
        return self.get_paginated_response(JobSummarySerializer(page, many=True, context=context).data)

    @extend_schema(request=JobCreateRequest, responses={202: JobDetailSerializer})
    def create(self, request, *args, **kwargs):
        data = job_request_validate(request.data)
        try:
            job = job_queue_from_request(data, request.user)
        except DjangoValidationError as exc:
            raise drf_validation_error(exc) from None
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data, status=202)

    @extend_schema(
        request=None,
        responses={200: JobDetailSerializer, 409: OpenApiResponse(ErrorSerializer, "The job has already ended.")},
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request, pk=None):
        try:
            job = job_cancel(job=self.get_object(), actor=request.user)
        except JobError as exc:
            return Response({"detail": str(exc)}, status=status.HTTP_409_CONFLICT)
        return Response(JobDetailSerializer(job, context=self.get_serializer_context()).data)
