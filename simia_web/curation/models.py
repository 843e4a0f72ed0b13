"""Trajectories and what people and the judge say of them: statuses, rule violations, judge verdicts, reviews bound
to a text version, holds, drafts, revisions, and the rollups and search entries kept with every write."""

from datetime import date

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
            # The default queue (waiting for review): its order, its count and an offset jump are index-only scans.
            models.Index(
                *QUEUE_ORDER_KEYS,
                name="trajectory_pending_queue",
                condition=Q(status__in=PENDING_STATUSES, reviewable=True),
                include=["id", "judge_confidence", "judge_score"],  # lets PostgreSQL answer from the index alone
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


class RuleViolation(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="violations")

    workspace_path = "trajectory__domain__workspace"
    code = models.CharField(max_length=40, db_index=True)
    message_index = models.IntegerField(null=True, blank=True)
    detail = models.TextField(blank=True)
    fixed = models.BooleanField(default=False, help_text="Repaired automatically; the repair is recorded here.")

    class Meta:
        ordering = ["trajectory_id", "message_index", "id"]

    def __str__(self):
        return f"{self.code}@{self.message_index}"


class JudgeVerdict(models.Model):
    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="verdicts")

    workspace_path = "trajectory__domain__workspace"
    passed = models.BooleanField(null=True)
    scores = models.JSONField(default=dict)
    score = models.FloatField(null=True)
    confidence = models.FloatField(null=True)
    rationale = models.TextField(blank=True)
    cited_messages = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)
    trajectory_version = models.PositiveIntegerField(default=1, help_text="The trajectory version this verdict judged.")
    profile = models.ForeignKey("llm.EndpointProfile", null=True, blank=True, on_delete=models.SET_NULL)
    model = models.CharField(max_length=120, blank=True)
    llm_call = models.ForeignKey("llm.LLMCall", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-id"]

    def __str__(self):
        return f"verdict {self.pk} passed={self.passed}"


class Decision(models.TextChoices):
    ACCEPT = "accept", "Accept"
    REJECT = "reject", "Reject"
    FIX_ACCEPT = "fix_accept", "Fix and accept"


# A decision that stands: neither undone nor superseded by a later change.
STANDING = Q(undone_at__isnull=True, superseded_at__isnull=True)


class Review(models.Model):
    """A person's decision. It stands while the trajectory stays at `trajectory_version`, the version the decision
    made; an undo (undone_at) or a later change to the text (superseded_at) ends it, and the row stays as history."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="reviews")

    workspace_path = "trajectory__domain__workspace"
    reviewer = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT)
    decision = models.CharField(max_length=16, choices=Decision.choices)
    reason = models.TextField(blank=True)
    trajectory_version = models.PositiveIntegerField(help_text="The version this decision made.")
    based_on_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The version the reviewer was looking at (when the decision recorded it)."
    )
    # Part of a bulk action: shown apart, and not counted as an individual judgement in agreement.
    bulk = models.BooleanField(default=False)
    batch = models.UUIDField(null=True, blank=True, db_index=True, help_text="The bulk action it was part of.")
    # The audit (audits.Audit, named by id: that app sits above this one) whose estimate a bulk acceptance rests on.
    audit = models.PositiveBigIntegerField(
        null=True, blank=True, help_text="The audit whose estimate this (bulk) decision rests on."
    )
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="undone_reviews"
    )
    superseded_at = models.DateTimeField(null=True, blank=True)
    superseded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="superseded_reviews"
    )
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-id"]
        indexes = [
            # The decision that stands on a trajectory (at most one).
            models.Index(fields=["trajectory"], name="review_standing", condition=STANDING),
            # The decisions resting on an audit (few reviews do).
            models.Index(fields=["audit", "trajectory"], name="review_audit", condition=Q(audit__isnull=False)),
        ]

    def __str__(self):
        return f"{self.decision} on {self.trajectory_id}"

    @property
    def standing(self) -> bool:
        return self.undone_at is None and self.superseded_at is None


class Change(models.TextChoices):
    EDIT = "edit", "edited"
    FIX_ACCEPT = "fix_accept", "fixed and accepted"
    ACCEPT = "accept", "accepted"
    REJECT = "reject", "rejected"
    REVERT = "revert", "reverted"
    UNDO = "undo", "undid a decision"


class TrajectoryChange(models.Model):
    """What made each version after the generated one (version 1), and who: the record a refused write names."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="changes")

    workspace_path = "trajectory__domain__workspace"
    version = models.PositiveIntegerField()
    action = models.CharField(max_length=16, choices=Change.choices)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    detail = models.CharField(max_length=200, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["trajectory_id", "version"]
        constraints = [
            models.UniqueConstraint(fields=["trajectory", "version"], name="trajectory_change_unique_version")
        ]

    def __str__(self):
        return f"{self.trajectory_id} v{self.version} {self.action}"


class EditorDraft(models.Model):
    """The editor's unsaved work of one person on one trajectory, saved as they type: the form's fields as posted
    ({name: [values]}), and the version they were editing."""

    trajectory = models.ForeignKey(Trajectory, on_delete=models.CASCADE, related_name="drafts")

    workspace_path = "trajectory__domain__workspace"
    author = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="editor_drafts")
    based_on_version = models.PositiveIntegerField()
    fields = models.JSONField(default=dict)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["trajectory", "author"], name="editor_draft_one_per_author")]

    def __str__(self):
        return f"draft of {self.trajectory_id} by {self.author_id}"


class Figure(models.TextChoices):
    """What a rollup row counts (curation.rollups says which facts of a trajectory add to which)."""

    STATUS = "status", "trajectories by status"
    VERDICT = "verdict", "trajectories by the judge's verdict"
    SCORE = "score", "trajectories by judge score bin"
    AGREEMENT = "agreement", "individually decided trajectories by judge verdict and decision"
    BULK_ONLY = "bulk_only", "trajectories decided only in bulk"
    AGREEMENT_DAY = "agreement_day", "individual decisions by day, agreeing with the judge or not"
    CRITERION_ACCEPTED = "criterion_accepted", "criterion scores of individually accepted trajectories"
    CRITERION_REJECTED = "criterion_rejected", "criterion scores of individually rejected trajectories"
    DECISIONS = "decisions", "decisions not undone by reviewer and day"


# The day of a rollup row whose figure is not by day (the key's columns are never null, so an upsert finds the row).
UNDATED = date(1970, 1, 1)


class Rollup(models.Model):
    """A count (and a sum, for means) of the trajectories that share a key: kept by the writes that change it, so the
    dashboard and the agreement page read these rows rather than every trajectory.

    `job`, `profile` and `reviewer` are plain ids, 0 for none or where the figure does not count by them: the key's
    columns are never null, as an upsert only finds a row whose key is equal, and NULL never is. Deleting a job or
    a judge profile leaves its rows under its old id until `manage.py rebuild_rollups`.
    """

    figure = models.CharField(max_length=24, choices=Figure.choices)
    domain = models.ForeignKey("catalog.Domain", on_delete=models.CASCADE, related_name="+")

    workspace_path = "domain__workspace"
    job = models.PositiveIntegerField(default=0)
    profile = models.PositiveIntegerField(default=0)
    reviewer = models.PositiveIntegerField(default=0)
    day = models.DateField(default=UNDATED)
    label = models.CharField(max_length=100, blank=True)
    n = models.BigIntegerField(default=0)
    total = models.FloatField(default=0.0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["figure", "domain", "job", "profile", "reviewer", "day", "label"], name="rollup_key"
            )
        ]

    def __str__(self):
        return f"{self.figure} {self.label} = {self.n}"
