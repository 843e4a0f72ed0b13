"""The one set of trajectory filters: the review queue page, the REST list and dataset exports."""

import django_filters
from django import forms
from django.contrib.postgres.search import SearchQuery
from django.db import connections
from django.db.models import Exists, OuterRef, Q, Subquery, TextField
from django.db.models.functions import Cast
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field

from simia_web.catalog.guidelines import guidelines_force_map
from simia_web.catalog.models import Domain
from simia_web.core.filters import BoundedFilterSet, IdFilter, TextFilter

from .models import PENDING_STATUSES, STANDING, Review, RuleViolation, Trajectory, TrajectoryKind, TrajectoryStatus

ALL = "all"
PENDING = "pending"  # waiting for a person: a pipeline status and a conversation worth reviewing


class StatusListField(forms.CharField):
    """A comma-separated list of trajectory statuses, or "all"."""

    def clean(self, value):
        value = super().clean(value)
        if not value:
            return None
        statuses = [s.strip() for s in value.split(",") if s.strip()]
        if statuses in ([ALL], [PENDING]):
            return statuses[0]
        unknown = [s for s in statuses if s not in TrajectoryStatus.values]
        if unknown:
            choices = ", ".join([*TrajectoryStatus.values, PENDING, ALL])
            raise forms.ValidationError(f"Unknown status {', '.join(unknown)}; choose from {choices}.")
        return statuses


@extend_schema_field(OpenApiTypes.DOUBLE)
class ScoreFilter(django_filters.NumberFilter):
    field_class = forms.FloatField


_STATUS = f"({'|'.join(TrajectoryStatus.values)})"


@extend_schema_field({"type": "string", "pattern": f"^({ALL}|{PENDING}|{_STATUS}(,{_STATUS})*)$"})
class StatusListFilter(django_filters.Filter):
    field_class = StatusListField

    def filter(self, qs, value):
        if not value or value == ALL:
            return qs
        if value == PENDING:
            return qs.filter(status__in=PENDING_STATUSES, reviewable=True)
        return qs.filter(status__in=value)


OLDER_GUIDELINES = "older"
GUIDELINES_CHOICES = [(OLDER_GUIDELINES, "Decided under older guidelines")]


def decided_under_older_guidelines() -> Q:
    """Trajectories whose standing decision names guidelines (or a version of them) other than those in force on
    their domain now: its own guidelines, else its workspace's default. A domain with none in force has no such
    item. One clause per domain with its own guidelines and per workspace default: a few, however many items."""
    force = guidelines_force_map()
    standing = Review.objects.filter(STANDING, trajectory=OuterRef("pk"))
    own = list(force.own)
    clauses = Q(pk__in=[])
    for domain_id, (guidelines_id, version) in force.own.items():
        other = standing.exclude(guidelines_id=guidelines_id, guidelines_version=version)
        clauses |= Q(domain_id=domain_id) & Q(Exists(other))
    for workspace_id, (guidelines_id, version) in force.defaults.items():
        domains = Domain.objects.filter(workspace_id=workspace_id).exclude(pk__in=own).values("pk")
        other = standing.exclude(guidelines_id=guidelines_id, guidelines_version=version)
        clauses |= Q(domain_id__in=domains) & Q(Exists(other))
    return clauses


VERDICTS = [("pass", "Judge: pass"), ("fail", "Judge: fail"), ("none", "No verdict")]


class TrajectoryFilter(BoundedFilterSet):
    domain = TextFilter(method="filter_domain", help_text="Domain name.")
    job = IdFilter(field_name="job_id")
    task = IdFilter(field_name="task_id")
    seed = IdFilter(field_name="seed_id")
    status = StatusListFilter(
        help_text="Comma-separated statuses, `pending` (waiting for review: the queue's default) or `all`."
    )
    kind = django_filters.ChoiceFilter(choices=TrajectoryKind.choices)
    judge_passed = django_filters.BooleanFilter()
    verdict = django_filters.ChoiceFilter(choices=VERDICTS, method="filter_verdict", empty_label="Any verdict")
    min_score = ScoreFilter(field_name="judge_score", lookup_expr="gte")
    max_score = ScoreFilter(field_name="judge_score", lookup_expr="lte")
    violation = TextFilter(method="filter_violation", help_text="An unfixed rule violation code.")
    q = TextFilter(
        method="filter_text",
        help_text="Words in the messages (PostgreSQL full-text match of every word; a substring match on SQLite).",
    )
    mine = django_filters.BooleanFilter(method="filter_mine", help_text="Only items assigned to the caller.")
    guidelines = django_filters.ChoiceFilter(
        choices=GUIDELINES_CHOICES,
        method="filter_guidelines",
        empty_label="Any guidelines",
        help_text="`older`: items whose standing decision was made under guidelines other than those in force now.",
    )

    class Meta:
        model = Trajectory
        fields: list[str] = []

    def filter_domain(self, qs, name, value):
        # The domain's id looked up once, so that a queue index walk checks it in the index (a join would not).
        return qs.filter(domain_id=Subquery(Domain.objects.filter(name=value).values("pk")[:1]))

    def filter_violation(self, qs, name, value):
        unfixed = RuleViolation.objects.filter(trajectory=OuterRef("pk"), code=value, fixed=False)
        return qs.filter(Exists(unfixed))

    def filter_verdict(self, qs, name, value):
        return (
            qs.filter(judge_passed={"pass": True, "fail": False}[value])
            if value != "none"
            else qs.filter(judge_passed__isnull=True)
        )

    def filter_mine(self, qs, name, value):
        user = getattr(self.request, "user", None)
        return qs.filter(assigned_to_id=user.pk) if value and user is not None else qs

    def filter_guidelines(self, qs, name, value):
        return qs.filter(decided_under_older_guidelines()) if value == OLDER_GUIDELINES else qs

    def filter_text(self, qs, name, value):
        # Portable fallback: elsewhere the messages are cast to text and matched case-insensitively.
        if connections[qs.db].vendor == "postgresql":
            # The stored vector and its GIN index (migration 0007): a match reads no conversation.
            return qs.filter(search_vector=SearchQuery(value, config="simple"))
        return qs.annotate(messages_text=Cast("messages", TextField())).filter(messages_text__icontains=value)
