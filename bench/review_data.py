"""The review benchmarks' data: N trajectories as the pipelines and reviewers leave them, written with COPY.

Eleven messages each (two tool calls) in six domains, with the mix of statuses, judge verdicts (with per-criterion
scores), rule violations and human decisions (a fifth of them bulk) of a team half-way through review. Every row
carries what the services keep beside it: the queue columns (preview, turns, tool calls, reviewable) and the content
hash from the services' own functions, the violations rules_check finds, the verdict copied onto the trajectory,
and for each decision its Review, the TrajectoryChange of the version it made and its audit event. The rows of one
load are spread over the 30 days before it, each decision a little after its trajectory.

Row i's conversation, status, verdict and decision are the same whichever load writes it, so a load resumes from
the rows already there (`load(1_000_000)` over 100k adds 900k). With `workspaces=2` the six domains are split
between the workspaces `team-a` (retail, airline, banking) and `team-b` (the other three), half of the rows each;
a database keeps the layout it was first loaded with. The search indexes (GIN, over the trajectories and
over the queue's search entries) are dropped while rows are written and built again at the end; a load that is
interrupted leaves their definitions in the database (bench_deferred_index) and the next load builds them.

Import it once Django is set up (it imports the models).
"""

import random
import sys
import uuid
from datetime import timedelta
from importlib import import_module

import orjson
from copy_rows import (
    PhaseClock,
    PhaseTime,
    TableRows,
    deferred_indexes_build,
    deferred_indexes_drop,
    identity_after_load,
)
from django.apps import apps
from django.db import connection, transaction
from django.db.models.functions import Mod
from django.utils import timezone

from simia_web.accounts.models import DEFAULT_WORKSPACE, User, Workspace
from simia_web.accounts.services import workspace_create
from simia_web.catalog.services import domain_ensure
from simia_web.core.jsonutil import content_hash
from simia_web.core.models import AuditEvent
from simia_web.curation.models import (
    Decision,
    JudgeVerdict,
    QueueSearchEntry,
    Review,
    RuleViolation,
    Trajectory,
    TrajectoryChange,
    pipeline_status,
)
from simia_web.curation.rollups import rollups_rebuild
from simia_web.curation.services import conversation_summary
from simia_web.formats.rules import rules_check
from simia_web.jobs.models import Job, JobStatus
from simia_web.simulation.judge import CRITERIA
from simia_web.synthesis.services import ROLLOUT

DOMAINS = ["retail", "airline", "banking", "calendar", "telecom", "travel"]
WORDS = [
    "order",
    "refund",
    "shipment",
    "address",
    "invoice",
    "booking",
    "flight",
    "seat",
    "account",
    "balance",
    "transfer",
    "meeting",
    "invite",
    "plan",
    "roaming",
    "hotel",
    "cancel",
    "change",
    "upgrade",
    "payment",
    "card",
    "delivery",
    "warranty",
    "return",
    "exchange",
    "baggage",
]
STATUSES = ["generated", "rules_failed", "judged_pass", "judged_fail", "accepted", "rejected"]
STATUS_WEIGHTS = [5, 8, 35, 22, 20, 10]
SEARCH_TERM = "zeppelin"  # in one conversation in a hundred
REVIEWERS = 4
ROWS_PER_JOB = 100_000
CHUNK_ROWS = 10_000  # a transaction each: an interrupted load keeps what it wrote
SPREAD = timedelta(days=30)
MODEL = "bench-model"
PROVENANCE = orjson.dumps({"model": MODEL, "stage": "rollout"}).decode()
JUDGE_MODEL = "bench-judge"


def domain_tools(domain: str) -> list[dict]:
    return [
        {
            "type": "function",
            "function": {
                "name": f"{domain}_{verb}",
                "description": f"{verb} a {domain} record",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}, "required": ["id"]},
            },
        }
        for verb in ("get", "update", "cancel")
    ]


# A random byte picks a word (each word 9 or 10 times in 256): a sentence costs one call into the generator.
WORD_OF_BYTE = [WORDS[b % len(WORDS)] for b in range(256)]


def domain_messages(rng: random.Random, domain: str, i: int, *, unknown_tool: bool) -> list[dict]:
    def sentence(n=14):
        return " ".join(map(WORD_OF_BYTE.__getitem__, rng.randbytes(n)))

    messages = [
        {"role": "system", "content": f"You are a {domain} agent. Follow the policy. " + sentence(30)},
        {"role": "user", "content": f"Hello, about {domain} item {i}: " + sentence()},
    ]
    for k in range(2):
        call_id = f"call_{i}_{k}"
        # A rollout the rules failed called a tool its domain does not have.
        name = f"{domain}_lookup" if unknown_tool and k == 0 else f"{domain}_get"
        call = {"name": name, "arguments": f'{{"id": "{domain[0].upper()}{i}"}}'}
        messages.append(
            {"role": "assistant", "content": "", "tool_calls": [{"id": call_id, "type": "function", "function": call}]}
        )
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f'{{"status": "{sentence(1)}"}}'})
        messages.append({"role": "assistant", "content": sentence()})
        messages.append({"role": "user", "content": sentence(10)})
    messages.append({"role": "assistant", "content": "Done. " + sentence()})
    if i % 100 == 0:
        messages[1]["content"] += f" and the {SEARCH_TERM}"
    return messages


def _verdict(rng: random.Random, passed: bool) -> tuple[dict, float, float]:
    """Per-criterion grades in tenths as the judge gives them, their mean and the judge's confidence."""
    low, grades = (6, 5) if passed else (0, 8)
    scores = {name: (low + b % grades) / 10 for name, b in zip(CRITERIA, rng.randbytes(len(CRITERIA)), strict=True)}
    return scores, round(sum(scores.values()) / len(scores), 2), round(rng.uniform(0.3, 1.0), 2)


class Loader:
    """Writes rows [start, stop) of the data set; the children of each trajectory are gathered as it is written."""

    def __init__(self, *, first_id: int, first_row: int, rows: int, now, domains: dict, jobs: dict, reviewers: list):
        self.first_id, self.first_row, self.now = first_id, first_row, now
        self.start_time, self.step = now - SPREAD, SPREAD / max(1, rows - first_row)
        self.domains, self.jobs, self.reviewers = domains, jobs, reviewers
        self.tools = {name: domain_tools(name) for name in DOMAINS}
        self.tools_json = {name: orjson.dumps(tools).decode() for name, tools in self.tools.items()}
        self.rng = random.Random()
        self.trajectories = TableRows(
            Trajectory,
            (
                "id",
                "kind",
                "status",
                "domain_id",
                "job_id",
                "messages",
                "tools",
                "termination_reason",
                "judge_passed",
                "judge_score",
                "judge_confidence",
                "violation_count",
                "preview",
                "turns",
                "tool_call_count",
                "reviewable",
                "model",
                "provenance",
                "content_hash",
                "version",
                "text_version",
                "created_at",
                "updated_at",
            ),
        )
        self.verdicts = TableRows(
            JudgeVerdict,
            (
                "trajectory_id",
                "passed",
                "scores",
                "score",
                "confidence",
                "rationale",
                "cited_messages",
                "trajectory_version",
                "model",
                "created_at",
            ),
        )
        self.violations = TableRows(RuleViolation, ("trajectory_id", "code", "message_index", "detail", "fixed"))
        self.reviews = TableRows(
            Review,
            (
                "trajectory_id",
                "reviewer_id",
                "decision",
                "reason",
                "trajectory_version",
                "based_on_version",
                "bulk",
                "batch",
                "created_at",
            ),
        )
        self.changes = TableRows(
            TrajectoryChange, ("trajectory_id", "version", "action", "actor_id", "detail", "created_at")
        )
        self.audit = TableRows(AuditEvent, ("actor_id", "action", "target_type", "target_id", "data", "created_at"))
        self.target_type = Trajectory._meta.label_lower

    def chunk(self, cursor, start: int, stop: int) -> None:
        children = {"verdicts": [], "violations": [], "reviews": [], "changes": [], "audit": []}
        self.trajectories.copy(cursor, (self._row(i, children) for i in range(start, stop)))
        for name, rows in children.items():
            getattr(self, name).copy(cursor, rows)

    def _row(self, i: int, children: dict) -> tuple:
        rng = self.rng
        rng.seed(i)
        name = DOMAINS[i % len(DOMAINS)]
        status = rng.choices(STATUSES, STATUS_WEIGHTS)[0]
        messages = domain_messages(rng, name, i, unknown_tool=status == "rules_failed")
        tools = self.tools[name]
        violations = rules_check(messages, tools) if status == "rules_failed" else []
        # A pending status is the one the rules and the verdict give; a person's decision disagrees with the judge
        # about one time in seven.
        if status == "generated":
            passed = None
        elif status in ("judged_pass", "judged_fail"):
            passed = status == "judged_pass"
        else:
            passed = (status == "accepted") ^ (rng.random() < 0.15)
        pk = self.first_id + i - self.first_row
        created = self.start_time + self.step * (i - self.first_row)
        score = confidence = None
        if passed is not None:
            scores, score, confidence = _verdict(rng, passed)
            children["verdicts"].append(
                (
                    pk,
                    passed,
                    orjson.dumps(scores).decode(),
                    score,
                    confidence,
                    "The agent " + ("completed the task." if passed else "did not complete the task."),
                    "[2]",
                    1,
                    JUDGE_MODEL,
                    created,
                )
            )
        for violation in violations:
            children["violations"].append((pk, violation.code, violation.message_index, violation.detail, False))
        version, updated = 1, created
        if status in ("accepted", "rejected"):
            version, updated = 2, min(self.now, created + timedelta(hours=rng.uniform(0, 48)))
            reviewer = self.reviewers[i % REVIEWERS]
            decision = Decision.ACCEPT if status == "accepted" else Decision.REJECT
            reason = "" if status == "accepted" else "wrong"
            bulk = i % 5 == 0
            batch = uuid.UUID(int=(i // 1000) * REVIEWERS + i % REVIEWERS + 1) if bulk else None
            previous = pipeline_status(violation_count=0, judge_passed=passed)
            children["reviews"].append((pk, reviewer, decision, reason, 2, 1, bulk, batch, updated))
            children["changes"].append((pk, 2, decision, reviewer, "bulk" if bulk else "", updated))
            data = {"from": previous, "to": status, "reason": reason, **({"bulk": True} if bulk else {})}
            children["audit"].append(
                (reviewer, "trajectory.status", self.target_type, str(pk), orjson.dumps(data).decode(), updated)
            )
        summary = conversation_summary(messages=messages, termination_reason="final_answer")
        return (
            pk,
            "rollout",
            status,
            self.domains[name],
            self.jobs[i // ROWS_PER_JOB],
            orjson.dumps(messages).decode(),
            self.tools_json[name],
            "final_answer",
            passed,
            score,
            confidence,
            len(violations),
            summary["preview"],
            summary["turns"],
            summary["tool_call_count"],
            summary["reviewable"],
            MODEL,
            PROVENANCE,
            content_hash({"messages": messages, "tools": tools}),
            version,
            1,
            created,
            updated,
        )


def workspace_slugs(workspaces: int) -> list[str]:
    """The workspaces a load with `workspaces` of them spreads the domains over, the bench's curator's first."""
    return [DEFAULT_WORKSPACE] if workspaces == 1 else [f"team-{chr(ord('a') + k)}" for k in range(workspaces)]


def domain_workspaces(workspaces: int) -> dict[str, int]:
    """Each domain's workspace id: DOMAINS split in order into `workspaces` equal runs."""
    slugs = workspace_slugs(workspaces)
    have = dict(Workspace.objects.filter(slug__in=slugs).values_list("slug", "pk"))
    ids = [have.get(slug) or workspace_create(slug=slug).pk for slug in slugs]
    return {name: ids[k * workspaces // len(DOMAINS)] for k, name in enumerate(DOMAINS)}


def load(rows: int, workspaces: int = 1) -> dict[str, PhaseTime]:
    """Load the data set up to `rows` trajectories (nothing when there are as many already), its domains spread
    over `workspaces` workspaces; returns the time and CPU each phase took."""
    have = Trajectory.objects.count()
    if have >= rows:
        deferred_indexes_build()  # what an interrupted load left
        print(f"{have} trajectories already loaded", file=sys.stderr)
        return {}
    clock = PhaseClock()
    owners = domain_workspaces(workspaces)
    domains = {name: domain_ensure(name=name, workspace_id=owners[name]).pk for name in DOMAINS}
    jobs = {}
    for block in range(have // ROWS_PER_JOB, -(-rows // ROWS_PER_JOB)):
        job = Job.objects.filter(kind=ROLLOUT, params={"bench_block": block}).first()
        job = job or Job.objects.create(kind=ROLLOUT, params={"bench_block": block}, status=JobStatus.SUCCEEDED)
        jobs[block] = job.pk
    reviewers = [
        User.objects.get_or_create(username=f"bench-annotator-{k}", defaults={"role": "annotator"})[0].pk
        for k in range(REVIEWERS)
    ]
    first_id = (Trajectory.objects.order_by("-pk").values_list("pk", flat=True).first() or 0) + 1
    loader = Loader(
        first_id=first_id,
        first_row=have,
        rows=rows,
        now=timezone.now(),
        domains=domains,
        jobs=jobs,
        reviewers=reviewers,
    )
    deferred_indexes_drop(Trajectory, using="gin")
    deferred_indexes_drop(QueueSearchEntry, using="gin")  # the trigger writes an entry per waiting row
    for start in range(have, rows, CHUNK_ROWS):
        with transaction.atomic(), connection.cursor() as cursor:
            loader.chunk(cursor, start, min(rows, start + CHUNK_ROWS))
            identity_after_load(cursor, Trajectory)
        done = min(rows, start + CHUNK_ROWS)
        rate = (done - have) / clock.elapsed()
        print(f"\r{done} / {rows} written ({rate:,.0f} rows/s)", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    clock.lap(f"rows ({rows - have:,})")
    deferred_indexes_build()
    clock.lap("search index")
    with connection.cursor() as cursor:
        for model in (Trajectory, QueueSearchEntry, JudgeVerdict, Review, RuleViolation, TrajectoryChange, AuditEvent):
            cursor.execute(f"VACUUM ANALYZE {model._meta.db_table}")
    clock.lap("vacuum, analyze")
    rollups_rebuild()  # COPY went around the services that keep them
    clock.lap("rollups")
    return clock.phases


# The reviewer stage over a loaded workspace: one standing decision in AWAITING_EVERY awaits review, one in
# SETTLED_EVERY (another residue) was settled by a reviewer (one in OVERTURNED_EVERY of those overturned), and one
# waiting item in GOLD_EVERY is gold, answered by every bench annotator (GOLD_CORRECT of them right).
AWAITING_EVERY = 10
SETTLED_EVERY = 10
OVERTURNED_EVERY = 5
GOLD_EVERY = 500
GOLD_CORRECT = 0.85


def review_stage_overlay(workspace_slug: str) -> bool:
    """Put the workspace's loaded decisions through the reviewer stage and mark gold items (once: False when it was
    done before), then recount the rollups. Written with SQL over the loaded rows, as the services would leave them:
    an awaiting decision's item is awaiting review; a settled one names its reviewer, when and (overturned) why;
    a gold answer is a review of stage `gold` that leaves its waiting item as it was."""
    from simia_web.accounts.scoping import scoped
    from simia_web.curation.models import GoldItem, ReviewStage, TrajectoryStatus

    workspace = Workspace.objects.get(slug=workspace_slug)
    reviews = scoped(Review.objects.filter(bulk=False, stage=ReviewStage.NONE), [workspace.pk])
    from simia_web.accounts.services import membership_set

    checker, _ = User.objects.get_or_create(username="bench-reviewer")
    membership_set(workspace=workspace, user=checker, role="reviewer")
    annotators = []
    for person in User.objects.filter(username__startswith="bench-annotator-"):
        membership_set(workspace=workspace, user=person, role="annotator")
        annotators.append(person.pk)
    if scoped(Review.objects.exclude(stage=ReviewStage.NONE), [workspace.pk]).exists():
        return False

    def every(queryset, n: int, residue: int):
        return queryset.alias(residue=Mod("id", n)).filter(residue=residue)

    with transaction.atomic():
        awaiting = every(reviews, AWAITING_EVERY, 0)
        Trajectory.objects.filter(pk__in=awaiting.values("trajectory_id")).update(
            status=TrajectoryStatus.AWAITING_REVIEW
        )
        awaiting.update(stage=ReviewStage.AWAITING)
        # What review_decide copies onto a decision it leaves waiting, written as the migration that added it does.
        import_module("simia_web.curation.migrations.0019_review_queue_columns").awaiting_copied(apps, None)
        settled = every(reviews, SETTLED_EVERY, 1)
        every(settled, OVERTURNED_EVERY * SETTLED_EVERY, 1).update(
            stage=ReviewStage.OVERTURNED, checked_by=checker, checked_at=timezone.now(), check_reason="bench"
        )
        settled.filter(stage=ReviewStage.NONE).update(
            stage=ReviewStage.CONFIRMED, checked_by=checker, checked_at=timezone.now()
        )
        waiting = scoped(Trajectory.objects.filter(status__in=("judged_pass", "judged_fail")), [workspace.pk])
        gold = list(every(waiting, GOLD_EVERY, 0).values_list("pk", "status", "domain_id"))
        GoldItem.objects.bulk_create(
            GoldItem(trajectory_id=pk, expected_decision="accept" if status == "judged_pass" else "reject")
            for pk, status, _ in gold
        )
        rng = random.Random(7)
        answers = []
        for pk, status, domain in gold:
            for annotator in annotators:
                right = rng.random() < GOLD_CORRECT
                accepted = (status == "judged_pass") == right
                answers.append(
                    Review(
                        trajectory_id=pk,
                        reviewer_id=annotator,
                        decision=Decision.ACCEPT if accepted else Decision.REJECT,
                        trajectory_version=1,
                        based_on_version=1,
                        stage=ReviewStage.GOLD,
                        gold_correct=right,
                        domain_id=domain,
                    )
                )
        Review.objects.bulk_create(answers, batch_size=5_000)
    rollups_rebuild()
    return True
