"""The trajectory: its kinds and statuses, the review queue's order (a generated priority, sort keys and the indexes
that serve them), and the narrow rows the queue's text search reads."""

from django.conf import settings
from django.contrib.postgres.search import SearchVectorField
from django.db import models
from django.db.models import Case, F, Q, Value, When
from django.db.models.functions import Coalesce

from simia_web.core.fields import DocumentJSONField


class TrajectoryKind(models.TextChoices):
    ROLLOUT = "rollout", "Simulated rollout"
    AMPLIFIED = "amplified", "Amplified from a seed"
    RL = "rl", "RL environment episode"
    DEMO = "demo", "Demo data"


class TrajectoryStatus(models.TextChoices):
    GENERATED = "generated", "Generated"
    RULES_FAILED = "rules_failed", "Rules failed"
    JUDGED_PASS = "judged_pass", "Judge: pass"
    JUDGED_FAIL = "judged_fail", "Judge: fail"
    ACCEPTED = "accepted", "Accepted"
    REJECTED = "rejected", "Rejected"
    # An annotator decided it where the reviewer stage is on: it counts (and is exported) once a reviewer confirms.
    AWAITING_REVIEW = "awaiting_review", "Awaiting review"


# Statuses that still wait for a human answer.
PENDING_STATUSES = (
    TrajectoryStatus.GENERATED,
    TrajectoryStatus.RULES_FAILED,
    TrajectoryStatus.JUDGED_PASS,
    TrajectoryStatus.JUDGED_FAIL,
)


def pipeline_status(*, violation_count: int, judge_passed: bool | None) -> str:
    """The status the rules and the judge give a trajectory nobody has decided: rules first, then the verdict."""
    if violation_count:
        return TrajectoryStatus.RULES_FAILED
    if judge_passed is None:
        return TrajectoryStatus.GENERATED
    return TrajectoryStatus.JUDGED_PASS if judge_passed else TrajectoryStatus.JUDGED_FAIL


# Review priority, most useful first: confident judge failures, judge-vs-human disagreements, rule failures, the rest.
# A stored generated column, so the queue's order is an index scan rather than a sort of every pending row.
PRIORITY = Case(
    When(Q(judge_passed=False, status__in=PENDING_STATUSES), then=Value(0)),
    When(
        Q(status=TrajectoryStatus.ACCEPTED, judge_passed=False)
        | Q(status=TrajectoryStatus.REJECTED, judge_passed=True),
        then=Value(1),
    ),
    When(status=TrajectoryStatus.RULES_FAILED, then=Value(2)),
    default=Value(3),
)

# The queue's default order as non-null ascending keys (confidence high first, score low first, newest first),
# so one B-tree index serves it and a page boundary is a single row comparison (keyset paging).
QUEUE_ORDER_KEYS = (
    F("priority"),
    Coalesce(-F("judge_confidence"), Value(1.0)),
    Coalesce(F("judge_score"), Value(2.0)),
    -F("id"),
)


def missing_last(name: str, missing: float | None = None):
    """A queue sort key on one column; `missing` stands in for NULL so that it sorts last (a keyset boundary
    cannot compare NULLs)."""
    return F(name) if missing is None else Coalesce(F(name), Value(missing))


# The queue's other sorts, ascending keys (a descending sort walks the same index backwards) ending with the id.
# Score has two: a missing score sorts last either way.
QUEUE_SORT_KEYS = {
    "date": (F("created_at"), F("id")),
    "score": (missing_last("judge_score", 2.0), F("id")),
    "-score": (missing_last("judge_score", -1.0), F("id")),
    "turns": (F("turns"), F("id")),
    "tools": (F("tool_call_count"), F("id")),
    "rules": (F("violation_count"), F("id")),
    "model": (F("model"), F("id")),
    "domain": (F("domain_name"), F("id")),
}
# The columns the queue's common filters read (status, waiting for review, domain, verdict), carried in each sort's
# index so that a filtered page is an index-only walk along its order.
QUEUE_FILTER_COLUMNS = ["status", "reviewable", "domain", "judge_passed"]


def _queue_sort_indexes() -> list[models.Index]:
    indexes = []
    for name, keys in QUEUE_SORT_KEYS.items():
        score = ["judge_score"] if "score" in name else []  # an expression index answers alone only with its column
        label = name.replace("-", "desc_")
        indexes.append(models.Index(*keys, name=f"trajectory_sort_{label}", include=[*QUEUE_FILTER_COLUMNS, *score]))
    # The default order under any filter (a status, a domain, a verdict): a walk of this index checks the filter
    # in the index alone and stops at a page.
    columns = [*QUEUE_FILTER_COLUMNS, "judge_confidence", "judge_score"]
    indexes.append(models.Index(*QUEUE_ORDER_KEYS, name="trajectory_queue_filtered", include=columns))
    return indexes


class Trajectory(models.Model):
    """A conversation in the canonical format: OpenAI chat messages plus the tools list.

    `steps` keeps per-message simulator data keyed by message index (as a string):
    {"patch": [...], "state_after": {...}, "errors": [...]}.
    """

    kind = models.CharField(max_length=16, choices=TrajectoryKind.choices)
    status = models.CharField(
        max_length=16, choices=TrajectoryStatus.choices, default=TrajectoryStatus.GENERATED, db_index=True
    )
    domain = models.ForeignKey("catalog.Domain", on_delete=models.PROTECT, related_name="trajectories")

    workspace_path = "domain__workspace"
    task = models.ForeignKey(
        "catalog.Task", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories"
    )
    seed = models.ForeignKey("catalog.Seed", null=True, blank=True, on_delete=models.SET_NULL, related_name="outputs")
    seed_version = models.PositiveIntegerField(null=True, blank=True)
    job = models.ForeignKey("jobs.Job", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectories")
    unit = models.OneToOneField(
        "jobs.JobUnit", null=True, blank=True, on_delete=models.SET_NULL, related_name="trajectory"
    )
    messages = DocumentJSONField(default=list)
    tools = DocumentJSONField(default=list, blank=True)
    steps = DocumentJSONField(default=dict, blank=True)
    initial_state = DocumentJSONField(default=dict, blank=True)
    final_state = DocumentJSONField(default=dict, blank=True)
    termination_reason = models.CharField(max_length=40, blank=True)
    reward = models.FloatField(null=True, blank=True)
    # Copied from the latest judge verdict so the review queue can filter and order in SQL.
    judge_passed = models.BooleanField(null=True, blank=True)
    judge_score = models.FloatField(null=True, blank=True)
    judge_confidence = models.FloatField(null=True, blank=True)
    violation_count = models.PositiveIntegerField(default=0)
    # The latest fidelity run's share of this trajectory's simulated responses that matched the reference's.
    fidelity = models.FloatField(null=True, blank=True)
    priority = models.GeneratedField(expression=PRIORITY, output_field=models.SmallIntegerField(), db_persist=True)
    # What a queue row shows without reading the messages; kept by the services that write messages.
    preview = models.CharField(max_length=200, blank=True)
    turns = models.PositiveIntegerField(default=0)
    tool_call_count = models.PositiveIntegerField(default=0)
    model = models.CharField(max_length=120, blank=True)
    # False for empty or errored conversations (no assistant answer): never offered for review, never accepted.
    reviewable = models.BooleanField(default=True)
    provenance = models.JSONField(default=dict, blank=True)
    content_hash = models.CharField(max_length=64, blank=True, db_index=True)
    # Every change a person makes (edit, fix, revert, decision, undo) advances `version`; a write names the version
    # it was based on. `text_version` is the version whose messages are current: verdicts older than it are stale.
    version = models.PositiveIntegerField(default=1)
    text_version = models.PositiveIntegerField(default=1)
    assigned_to = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="assigned_trajectories"
    )
    reserved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="reserved_trajectories"
    )
    reserved_until = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)
    updated_at = models.DateTimeField(auto_now=True)
    # The messages' words for text search, kept by a PostgreSQL trigger from `messages` (migration 0007), so a match
    # never parses a conversation again. Portable fallback: NULL and unused on SQLite, where the text filter casts the
    # messages instead (curation.filters).
    search_vector = SearchVectorField(null=True, editable=False)
    # The domain's name (names never change), kept by the same trigger, so that the domain sort is one index
    # rather than a join; empty (unused: that sort joins) on SQLite.
    domain_name = models.CharField(max_length=80, blank=True, editable=False)

    class Meta:
        ordering = ["-id"]
        indexes = [
            models.Index(fields=["domain", "status"]),
            models.Index(fields=["job", "status"]),
            # The default queue (waiting for review): its order, its count and an offset jump are index-only scans,
            # within a workspace too (its domains are a filter on the included domain).
            models.Index(
                *QUEUE_ORDER_KEYS,
                name="trajectory_pending_queue",
                condition=Q(status__in=PENDING_STATUSES, reviewable=True),
                include=["id", "judge_confidence", "judge_score", "domain_id"],  # answers from the index alone
            ),
            # Counts of the waiting items of a domain and verdict, answered from the index alone.
            models.Index(
                fields=["domain", "judge_passed"],
                name="trajectory_pending_domain",
                condition=Q(status__in=PENDING_STATUSES, reviewable=True),
            ),
            *_queue_sort_indexes(),
        ]

    def __str__(self):
        return f"trajectory {self.pk} ({self.status})"


class QueueSearchEntry(models.Model):
    """A trajectory waiting for review as the queue's text search reads it: its search vector beside the queue's
    sort and filter columns, one narrow row each (the vector itself stored out of line), kept by a PostgreSQL
    trigger on the trajectory (migration 0009); empty (unused) on SQLite.

    A word in one conversation in a hundred matches thousands of trajectories scattered over their wide rows, and
    putting the matches in queue order reads every one: here they lie on a few cached pages, so the match and the
    order are answered in one pass of the search index over this table. Columns carry the trajectory's names, so the
    queue's sort keys and filters apply to it as they are."""

    id = models.BigIntegerField(primary_key=True)  # the trajectory's
    priority = models.SmallIntegerField()
    judge_confidence = models.FloatField(null=True)
    judge_score = models.FloatField(null=True)
    judge_passed = models.BooleanField(null=True)
    domain_id = models.BigIntegerField()

    workspace_path = "domain_id"  # a plain column (the trigger writes it): accounts.scoping reads it as such
    domain_name = models.CharField(max_length=80)
    created_at = models.DateTimeField()
    turns = models.PositiveIntegerField()
    tool_call_count = models.PositiveIntegerField()
    violation_count = models.PositiveIntegerField()
    model = models.CharField(max_length=120)
    search_vector = SearchVectorField()  # its GIN index, like the trigger, is PostgreSQL's only (migration 0009)

    def __str__(self):
        return f"queue search entry {self.pk}"
