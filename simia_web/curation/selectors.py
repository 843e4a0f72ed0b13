"""Reads for the annotators' workspace: the review queue, one trajectory, agreement metrics."""

import difflib
import json
from collections import defaultdict
from dataclasses import dataclass, field

from django.db.models import (
    Case,
    CharField,
    Count,
    Exists,
    F,
    IntegerField,
    Max,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    TextField,
    Value,
    When,
    Window,
)
from django.db.models.functions import Cast, RowNumber
from django.utils import timezone

from simia_web.curation.canonical import parse_arguments

from .models import Decision, JudgeVerdict, Review, RuleViolation, Trajectory, TrajectoryStatus

# Statuses that still wait for a human answer.
PENDING_STATUSES = (
    TrajectoryStatus.GENERATED,
    TrajectoryStatus.RULES_FAILED,
    TrajectoryStatus.JUDGED_PASS,
    TrajectoryStatus.JUDGED_FAIL,
)


@dataclass
class QueueFilters:
    domain: int | None = None
    job: int | None = None
    status: str = "pending"  # "pending", "all" or one TrajectoryStatus
    verdict: str = ""  # "", "pass", "fail", "none"
    score_min: float | None = None
    score_max: float | None = None
    violation: str = ""
    text: str = ""
    assigned: int | None = None
    extra: dict = field(default_factory=dict)


def _disagreement() -> Q:
    return Q(status=TrajectoryStatus.ACCEPTED, judge_passed=False) | Q(
        status=TrajectoryStatus.REJECTED, judge_passed=True
    )


def queue_ordering() -> list:
    """Most useful first: confident judge failures, then judge-vs-human disagreements, rule failures, low scores."""
    return [
        F("priority").asc(),
        F("judge_confidence").desc(nulls_last=True),
        F("judge_score").asc(nulls_last=True),
        F("id").desc(),
    ]


def review_queue(filters: QueueFilters) -> QuerySet[Trajectory]:
    qs = Trajectory.objects.all()
    if filters.status == "pending":
        qs = qs.filter(status__in=PENDING_STATUSES)
    elif filters.status and filters.status != "all":
        qs = qs.filter(status=filters.status)
    if filters.domain:
        qs = qs.filter(domain_id=filters.domain)
    if filters.job:
        qs = qs.filter(job_id=filters.job)
    if filters.verdict == "pass":
        qs = qs.filter(judge_passed=True)
    elif filters.verdict == "fail":
        qs = qs.filter(judge_passed=False)
    elif filters.verdict == "none":
        qs = qs.filter(judge_passed__isnull=True)
    if filters.score_min is not None:
        qs = qs.filter(judge_score__gte=filters.score_min)
    if filters.score_max is not None:
        qs = qs.filter(judge_score__lte=filters.score_max)
    if filters.violation:
        qs = qs.filter(
            Exists(RuleViolation.objects.filter(trajectory=OuterRef("pk"), code=filters.violation, fixed=False))
        )
    if filters.assigned:
        qs = qs.filter(assigned_to_id=filters.assigned)
    if filters.text:
        # The JSON text of the messages: matches message content, tool arguments and results.
        qs = qs.annotate(messages_text=Cast("messages", TextField())).filter(messages_text__icontains=filters.text)
    qs = qs.annotate(
        priority=Case(
            When(judge_passed=False, status__in=PENDING_STATUSES, then=Value(0)),
            When(_disagreement(), then=Value(1)),
            When(status=TrajectoryStatus.RULES_FAILED, then=Value(2)),
            default=Value(3),
            output_field=IntegerField(),
        )
    )
    return qs.order_by(*queue_ordering())


def queue_page_rows(qs: QuerySet[Trajectory]) -> QuerySet[Trajectory]:
    """What a queue row shows, in one query (no per-row lookups)."""
    return qs.select_related("domain", "job", "assigned_to", "reserved_by").defer(
        "messages", "tools", "steps", "initial_state", "final_state", "provenance"
    )


def queue_neighbours(qs: QuerySet[Trajectory], trajectory_id: int) -> tuple[int | None, int | None, int | None]:
    """(previous id, next id, 1-based position) of a trajectory within the ordered queue, in two queries."""
    # Django applies filters on window annotations after numbering, but filters on plain columns
    # before it; `row_id` is the id as a (trivial) window so filtering on it keeps the whole queue numbered.
    numbered = qs.annotate(
        position=Window(RowNumber(), order_by=queue_ordering()),
        row_id=Window(Max("id"), partition_by=[F("id")]),
    ).values("id", "position")
    here = numbered.filter(row_id=trajectory_id).first()
    if here is None:
        first = qs.values_list("id", flat=True).first()
        return None, (first if first != trajectory_id else None), None
    position = here["position"]
    around = {row["position"]: row["id"] for row in numbered.filter(position__in=[position - 1, position + 1])}
    return around.get(position - 1), around.get(position + 1), position


def trajectory_detail(pk: int) -> Trajectory:
    return (
        Trajectory.objects.select_related("domain", "task", "seed", "job", "assigned_to", "reserved_by")
        .prefetch_related(
            "violations",
            Prefetch("verdicts", queryset=JudgeVerdict.objects.select_related("profile")),
            Prefetch("reviews", queryset=Review.objects.select_related("reviewer")),
        )
        .get(pk=pk)
    )


def reservation_holder(trajectory: Trajectory, user):
    """The other user holding a live reservation on the trajectory, or None."""
    if (
        trajectory.reserved_by_id
        and trajectory.reserved_by_id != user.pk
        and trajectory.reserved_until
        and trajectory.reserved_until > timezone.now()
    ):
        return trajectory.reserved_by
    return None


def status_counts() -> dict[str, int]:
    counts = dict(Trajectory.objects.values_list("status").annotate(n=Count("id")).order_by())
    return {value: counts.get(value, 0) for value in TrajectoryStatus.values}


def violation_codes() -> list[str]:
    return list(RuleViolation.objects.filter(fixed=False).values_list("code", flat=True).distinct().order_by("code"))


# ---------------------------------------------------------------- presentation of one trajectory


def pretty_json(value) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True)


def _diff_lines(before, after) -> list[tuple[str, str]]:
    """Line diff of two JSON values as (kind, text) with kind in {"add", "del", "ctx", "hunk"}."""
    lines = []
    a, b = pretty_json(before).splitlines(), pretty_json(after).splitlines()
    for line in difflib.unified_diff(a, b, lineterm="", n=2):
        if line.startswith(("---", "+++")):
            continue
        kind = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "ctx")
        lines.append((kind, line))
    return lines


def json_diff(before, after) -> list[tuple[str, str]]:
    return _diff_lines(before, after)


@dataclass
class ChatItem:
    index: int
    role: str
    text: str
    name: str = ""
    tool_call_id: str = ""
    tool_calls: list = field(default_factory=list)  # [{"id", "name", "arguments"}]
    patch: str = ""
    state_diff: list = field(default_factory=list)
    step_errors: list = field(default_factory=list)
    violations: list = field(default_factory=list)
    cited: bool = False


def _content_text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "".join(part.get("text", "") for part in content if isinstance(part, dict))
    if content is None:
        return ""
    if isinstance(content, str):
        # Tool results are often JSON: pretty-print them for reading.
        if message.get("role") == "tool":
            try:
                return pretty_json(json.loads(content))
            except ValueError:
                return content
        return content
    return pretty_json(content)


def chat_items(trajectory: Trajectory, cited: set[int]) -> list[ChatItem]:
    """The conversation ready for the template; all text stays plain and is escaped when rendered."""
    violations_by_index = defaultdict(list)
    for violation in trajectory.violations.all():
        violations_by_index[violation.message_index].append(violation)
    state = trajectory.initial_state or {}
    items = []
    for index, message in enumerate(trajectory.messages or []):
        calls = []
        for call in message.get("tool_calls") or []:
            arguments, error = parse_arguments(call)
            raw = (call.get("function") or {}).get("arguments", "")
            calls.append(
                {
                    "id": call.get("id", ""),
                    "name": (call.get("function") or {}).get("name", ""),
                    "arguments": pretty_json(arguments) if error is None else str(raw),
                    "error": error or "",
                }
            )
        item = ChatItem(
            index=index,
            role=str(message.get("role", "")),
            text=_content_text(message),
            name=str(message.get("name", "")),
            tool_call_id=str(message.get("tool_call_id", "")),
            tool_calls=calls,
            violations=violations_by_index.get(index, []),
            cited=index in cited,
        )
        step = (trajectory.steps or {}).get(str(index))
        if isinstance(step, dict):
            if step.get("patch"):
                item.patch = pretty_json(step["patch"])
            if "state_after" in step and isinstance(step["state_after"], dict):
                item.state_diff = _diff_lines(state, step["state_after"])
                state = step["state_after"]
            item.step_errors = [str(e) for e in step.get("errors") or []]
        items.append(item)
    return items


def editable_messages(trajectory: Trajectory, posted=None) -> list[dict]:
    """Per-message text fields for the inline editor (tool-call messages keep their calls).

    After a refused save, `posted` (the submitted form) keeps what the annotator typed.
    """
    fields = []
    for i, message in enumerate(trajectory.messages or []):
        text = message.get("content") if isinstance(message.get("content"), str) else ""
        if posted is not None and f"content-{i}" in posted:
            text = posted[f"content-{i}"]
        fields.append({"index": i, "role": message.get("role", ""), "text": text})
    return fields


# ---------------------------------------------------------------- judge vs human agreement


def cohen_kappa(matrix: dict[tuple[bool, bool], int]) -> float | None:
    """Cohen's kappa for a 2x2 matrix keyed by (judge passed, human accepted); None when undefined."""
    a = matrix.get((True, True), 0)
    b = matrix.get((True, False), 0)
    c = matrix.get((False, True), 0)
    d = matrix.get((False, False), 0)
    n = a + b + c + d
    if not n:
        return None
    observed = (a + d) / n
    expected = ((a + b) * (a + c) + (c + d) * (b + d)) / (n * n)
    if expected == 1:
        return 1.0 if observed == 1 else None
    return (observed - expected) / (1 - expected)


def _reviewed(domain=None, job=None, profile=None) -> QuerySet[Trajectory]:
    latest_review = Review.objects.filter(trajectory=OuterRef("pk")).order_by("-id")
    latest_verdict = JudgeVerdict.objects.filter(trajectory=OuterRef("pk")).order_by("-id")
    qs = Trajectory.objects.filter(judge_passed__isnull=False).annotate(
        human=Subquery(latest_review.values("decision")[:1], output_field=CharField()),
        verdict_id=Subquery(latest_verdict.values("id")[:1]),
        verdict_profile=Subquery(latest_verdict.values("profile_id")[:1]),
    )
    qs = qs.filter(human__isnull=False)
    if domain:
        qs = qs.filter(domain_id=domain)
    if job:
        qs = qs.filter(job_id=job)
    if profile:
        qs = qs.filter(verdict_profile=profile)
    return qs


def agreement(*, domain=None, job=None, profile=None, criteria: bool = True) -> dict:
    """Judge verdict vs the latest human decision over reviewed items, in two queries."""
    reviewed = _reviewed(domain, job, profile)
    matrix: dict[tuple[bool, bool], int] = {}
    for judge_passed, human, n in reviewed.values_list("judge_passed", "human").annotate(n=Count("id")).order_by():
        key = (bool(judge_passed), human != Decision.REJECT)
        matrix[key] = matrix.get(key, 0) + n
    total = sum(matrix.values())
    agreed = matrix.get((True, True), 0) + matrix.get((False, False), 0)
    result = {
        "matrix": matrix,
        "cells": {
            "pass_accept": matrix.get((True, True), 0),
            "pass_reject": matrix.get((True, False), 0),
            "fail_accept": matrix.get((False, True), 0),
            "fail_reject": matrix.get((False, False), 0),
        },
        "total": total,
        "agreement": agreed / total if total else None,
        "kappa": cohen_kappa(matrix),
        "criteria": [],
    }
    if criteria and total:
        result["criteria"] = criterion_breakdown(reviewed)
    return result


def criterion_breakdown(reviewed: QuerySet[Trajectory]) -> list[dict]:
    """Mean judge score per criterion for human-accepted vs human-rejected items (latest verdicts)."""
    sums = defaultdict(lambda: {"accept": [0.0, 0], "reject": [0.0, 0]})
    rows = JudgeVerdict.objects.filter(pk__in=reviewed.values("verdict_id")).annotate(
        human=Subquery(
            Review.objects.filter(trajectory=OuterRef("trajectory_id")).order_by("-id").values("decision")[:1]
        )
    )
    for scores, human in rows.values_list("scores", "human").iterator(chunk_size=2000):
        side = "reject" if human == Decision.REJECT else "accept"
        for name, value in (scores or {}).items():
            if isinstance(value, dict):
                value = value.get("score")
            if isinstance(value, int | float) and not isinstance(value, bool):
                sums[name][side][0] += value
                sums[name][side][1] += 1
    table = []
    for name in sorted(sums):
        acc, rej = sums[name]["accept"], sums[name]["reject"]
        mean_acc = acc[0] / acc[1] if acc[1] else None
        mean_rej = rej[0] / rej[1] if rej[1] else None
        gap = mean_acc - mean_rej if mean_acc is not None and mean_rej is not None else None
        table.append(
            {"name": name, "accepted": mean_acc, "rejected": mean_rej, "n_acc": acc[1], "n_rej": rej[1], "gap": gap}
        )
    return table
