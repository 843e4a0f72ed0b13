"""Reads for the annotators' workspace: the review queue, one trajectory, agreement metrics."""

import json
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import timedelta

from django.db.models import (
    BooleanField,
    CharField,
    Count,
    Exists,
    F,
    Func,
    OuterRef,
    Prefetch,
    Q,
    QuerySet,
    Subquery,
    Value,
)
from django.db.models.functions import Coalesce, Floor, Least, TruncDate
from django.utils import timezone

from simia_web.core.clipping import clipped
from simia_web.core.display import messages_side_by_side, pretty_json, state_diff
from simia_web.core.selectors import revision_list
from simia_web.formats.conversation import message_text, parse_arguments

from .models import (
    QUEUE_ORDER_KEYS,
    STANDING,
    Decision,
    EditorDraft,
    JudgeVerdict,
    Review,
    RuleViolation,
    Trajectory,
    TrajectoryStatus,
)


@dataclass(frozen=True)
class QueueSort:
    """An order of the queue as keys that are all ascending or all descending, ending with a unique column,
    so that a page boundary is one row comparison (keyset paging: the same cost at any depth)."""

    keys: tuple
    descending: bool = False

    def order_by(self, reverse: bool = False) -> list:
        descending = self.descending != reverse
        return [key.desc() if descending else key.asc() for key in self.keys]


def _column(name: str, missing_low=None, missing_high=None) -> dict[str, QueueSort]:
    """Ascending and descending sorts on one column (missing values last either way) with the id as tie-break."""
    up = Coalesce(F(name), Value(missing_high)) if missing_high is not None else F(name)
    down = Coalesce(F(name), Value(missing_low)) if missing_low is not None else F(name)
    return {"up": QueueSort((up, F("id"))), "down": QueueSort((down, F("id")), descending=True)}


def _sorts() -> dict[str, QueueSort]:
    sorts = {"priority": QueueSort(QUEUE_ORDER_KEYS)}
    columns = {
        "date": _column("created_at"),
        "score": _column("judge_score", missing_low=-1.0, missing_high=2.0),
        "turns": _column("turns"),
        "tools": _column("tool_call_count"),
        "rules": _column("violation_count"),
        "domain": _column("domain__name"),
        "model": _column("model"),
    }
    for name, both in columns.items():
        sorts[name], sorts[f"-{name}"] = both["up"], both["down"]
    return sorts


QUEUE_SORTS = _sorts()
DEFAULT_SORT = "priority"


class RowComparison(Func):
    """(k1, k2, ...) > (v1, v2, ...) (or <): a B-tree index on the keys answers it as one range."""

    output_field = BooleanField()
    conditional = True

    def __init__(self, keys, values, operator: str):
        super().__init__(*keys, *(Value(v) for v in values))
        self.operator = operator

    def as_sql(self, compiler, connection, **extra_context):
        parts, params = [], []
        for expression in self.get_source_expressions():
            sql, expression_params = compiler.compile(expression)
            parts.append(sql)
            params.extend(expression_params)
        half = len(parts) // 2
        return f"({', '.join(parts[:half])}) {self.operator} ({', '.join(parts[half:])})", params


def queue_sort(name: str | None) -> QueueSort:
    return QUEUE_SORTS.get(name or DEFAULT_SORT, QUEUE_SORTS[DEFAULT_SORT])


def queue_ordered(qs: QuerySet[Trajectory], sort: str | None = None) -> QuerySet[Trajectory]:
    return qs.order_by(*queue_sort(sort).order_by())


def _boundary(order: QueueSort, trajectory_id: int):
    """The sort key values of one row (from the whole table: the row may have left the filtered queue)."""
    names = {f"k{i}": key for i, key in enumerate(order.keys)}
    return Trajectory.objects.filter(pk=trajectory_id).annotate(**names).values_list(*names).first()


def _beyond(qs: QuerySet[Trajectory], order: QueueSort, values, reverse: bool) -> QuerySet[Trajectory]:
    later = "<" if order.descending else ">"
    operator = {">": "<", "<": ">"}[later] if reverse else later
    return qs.filter(RowComparison(order.keys, values, operator)).order_by(*order.order_by(reverse=reverse))


def queue_after(
    qs: QuerySet[Trajectory], trajectory_id: int, sort: str | None = None, reverse: bool = False
) -> QuerySet[Trajectory]:
    """The rows of the queue after (or, with reverse, before and in reverse order) a given row."""
    order = queue_sort(sort)
    values = _boundary(order, trajectory_id)
    return qs.none() if values is None else _beyond(qs, order, values, reverse)


@dataclass
class QueuePage:
    rows: list
    count: int
    number: int
    size: int
    has_next: bool
    count_capped: bool = False  # more than `count` match; counting them all would read every match

    @property
    def num_pages(self) -> int:
        return max(1, -(-self.count // self.size))

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def first_id(self):
        return self.rows[0].pk if self.rows else None

    @property
    def last_id(self):
        return self.rows[-1].pk if self.rows else None

    def numbers(self) -> list[int | None]:
        """Page numbers to offer: the first, the last and two either side of this one (None marks a gap)."""
        wanted = sorted({1, self.num_pages, *range(max(1, self.number - 2), min(self.num_pages, self.number + 2) + 1)})
        shown, last = [], 0
        for n in wanted:
            if n > last + 1:
                shown.append(None)
            shown.append(n)
            last = n
        return shown


def queue_page(
    qs: QuerySet[Trajectory],
    sort: str | None,
    *,
    number: int = 1,
    after=None,
    before=None,
    size: int = 50,
    count_limit: int | None = None,
) -> QueuePage:
    """One page of the queue. Next/previous follow a row id (keyset); a page number jumps by offset along
    the index, and the last page is read from the other end. With `count_limit`, counting stops there."""
    count = qs[: count_limit + 1].count() if count_limit else qs.count()
    capped = bool(count_limit) and count > count_limit
    count = min(count, count_limit) if capped else count
    num_pages = max(1, -(-count // size))
    number = min(max(1, number), num_pages)
    rows_qs = queue_page_rows(qs)
    if after is not None:
        rows = list(queue_after(rows_qs, after, sort)[: size + 1])
    elif before is not None:
        rows = list(queue_after(rows_qs, before, sort, reverse=True)[:size])[::-1]
        return QueuePage(rows, count, number, size, has_next=True, count_capped=capped)
    elif number == num_pages and number > 1 and not capped:
        last = count - (num_pages - 1) * size
        rows = list(rows_qs.order_by(*queue_sort(sort).order_by(reverse=True))[:last])[::-1]
    else:
        # The ids first (an index-only scan where an index covers the order), then only those rows.
        ids = list(queue_ordered(qs, sort).values_list("pk", flat=True)[(number - 1) * size : number * size + 1])
        by_id = rows_qs.order_by().in_bulk(ids)
        rows = [by_id[pk] for pk in ids if pk in by_id]
    return QueuePage(rows[:size], count, number, size, has_next=len(rows) > size, count_capped=capped)


def queue_page_rows(qs: QuerySet[Trajectory]) -> QuerySet[Trajectory]:
    """What a queue row shows, in one query (no per-row lookups)."""
    return qs.select_related("domain", "assigned_to", "reserved_by").defer(
        "messages", "tools", "steps", "initial_state", "final_state", "provenance"
    )


def queue_neighbours(
    qs: QuerySet[Trajectory], trajectory_id: int, sort: str | None = None
) -> tuple[int | None, int | None, int | None]:
    """(previous id, next id, 1-based position) of a trajectory within the ordered queue: index range reads,
    no numbering of the whole queue. The position is None when the trajectory is not (or no longer) in it."""
    order = queue_sort(sort)
    values = _boundary(order, trajectory_id)
    if values is None:
        return None, None, None
    before = _beyond(qs, order, values, reverse=True)
    previous_id = before.values_list("pk", flat=True).first()
    next_id = _beyond(qs, order, values, reverse=False).values_list("pk", flat=True).first()
    position = before.order_by().count() + 1 if qs.filter(pk=trajectory_id).exists() else None
    return previous_id, next_id, position


def trajectory_detail_queryset() -> QuerySet[Trajectory]:
    return Trajectory.objects.select_related(
        "domain", "task", "seed", "job", "assigned_to", "reserved_by"
    ).prefetch_related(
        "violations",
        Prefetch("verdicts", queryset=JudgeVerdict.objects.select_related("profile")),
        Prefetch("reviews", queryset=Review.objects.select_related("reviewer", "undone_by", "superseded_by")),
    )


def trajectory_detail(pk: int) -> Trajectory:
    return trajectory_detail_queryset().get(pk=pk)


def standing_review(reviews) -> Review | None:
    """The decision that stands on a trajectory, from its (prefetched) reviews: at most one does."""
    return next((review for review in reviews if review.standing), None)


def verdicts_split(verdicts) -> tuple[JudgeVerdict | None, list[JudgeVerdict], list[JudgeVerdict]]:
    """(the standing verdict: the latest that is not a failed call; the failed calls since it; the earlier verdicts)
    of a trajectory's verdicts, newest first. A failed call never replaces a verdict, it is shown beside it."""
    standing = next((v for v in verdicts if not v.error), None)
    if standing is None:
        return None, [v for v in verdicts if v.error], []
    position = verdicts.index(standing)
    return standing, verdicts[:position], [v for v in verdicts[position + 1 :] if not v.error]


def draft_for(trajectory: Trajectory, user) -> EditorDraft | None:
    return EditorDraft.objects.filter(trajectory=trajectory, author=user).first()


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


# A revision shows at most this many changed messages, each cut shorter than on the conversation (20 revisions).
REVISION_ROWS = 50
REVISION_TEXT_CHARS = 1000


@dataclass
class ChatItem:
    index: int
    role: str
    text: str
    name: str = ""
    tool_call_id: str = ""
    tool_calls: list = field(default_factory=list)  # [{"id", "name", "arguments", "error"}]
    patch: str = ""
    state_diff: list = field(default_factory=list)
    state_note: str = ""
    step_errors: list = field(default_factory=list)
    violations: list = field(default_factory=list)
    cited: bool = False
    clipped: bool = False


def _content_text(message: dict) -> str:
    content = message.get("content")
    if content is None or isinstance(content, list):
        return message_text(message)
    if isinstance(content, str):
        # Tool results are often JSON: pretty-print them for reading.
        if message.get("role") == "tool":
            try:
                return pretty_json(json.loads(content))
            except ValueError:
                return content
        return content
    return pretty_json(content)


def _state_before(trajectory: Trajectory, index: int):
    """The environment state just before message `index`: the last recorded state after an earlier step."""
    steps = trajectory.steps or {}
    for earlier in range(index - 1, -1, -1):
        step = steps.get(str(earlier))
        if isinstance(step, dict) and isinstance(step.get("state_after"), dict):
            return step["state_after"]
    return trajectory.initial_state or {}


def chat_items(
    trajectory: Trajectory, cited: set[int], *, start: int = 0, stop: int | None = None, full: int | None = None
) -> list[ChatItem]:
    """Messages start..stop of the conversation ready for the template; all text stays plain and is escaped when
    rendered. Long texts are cut (ChatItem.clipped) except in message `full`, which is shown whole."""
    messages = trajectory.messages or []
    stop = len(messages) if stop is None else min(stop, len(messages))
    violations_by_index = defaultdict(list)
    for violation in trajectory.violations.all():
        if start <= (violation.message_index if violation.message_index is not None else -1) < stop:
            violations_by_index[violation.message_index].append(violation)
    state = _state_before(trajectory, start)
    items = []
    for index in range(start, stop):
        message = messages[index]
        if not isinstance(message, dict):
            message = {"role": "?", "content": str(message)}
        whole = index == full
        text, cut = clipped(_content_text(message), whole)
        calls = []
        for call in message.get("tool_calls") or []:
            arguments, error = parse_arguments(call)
            raw = (call.get("function") or {}).get("arguments", "")
            shown, cut_call = clipped(pretty_json(arguments) if error is None else str(raw), whole)
            cut = cut or cut_call
            calls.append(
                {
                    "id": call.get("id", ""),
                    "name": (call.get("function") or {}).get("name", ""),
                    "arguments": shown,
                    "error": clipped(error or "")[0],
                }
            )
        item = ChatItem(
            index=index,
            role=str(message.get("role", "")),
            text=text,
            name=str(message.get("name", "")),
            tool_call_id=str(message.get("tool_call_id", "")),
            tool_calls=calls,
            violations=violations_by_index.get(index, []),
            cited=index in cited,
        )
        step = (trajectory.steps or {}).get(str(index))
        if isinstance(step, dict):
            if step.get("patch"):
                item.patch, cut_patch = clipped(pretty_json(step["patch"]), whole)
                cut = cut or cut_patch
            if "state_after" in step and isinstance(step["state_after"], dict):
                item.state_diff, item.state_note = state_diff(state, step["state_after"])
                state = step["state_after"]
            item.step_errors = [clipped(str(e))[0] for e in (step.get("errors") or [])[:20]]
        item.clipped = cut
        items.append(item)
    return items


def _row_clipped(side):
    return (side[0], side[1], clipped(side[2], limit=REVISION_TEXT_CHARS)[0]) if side else None


def revision_history(trajectory: Trajectory, limit: int = 20) -> list[dict]:
    """The trajectory's versions, newest first, each with its changes beside the version before it (the first
    REVISION_ROWS changed messages, texts cut; `more_rows` counts the rest)."""
    revisions = list(revision_list(obj=trajectory)[: limit + 1])
    history = []
    for i, revision in enumerate(revisions[:limit]):
        previous = revisions[i + 1] if i + 1 < len(revisions) else None
        before = (previous.data or {}).get("messages", []) if previous else None
        rows = messages_side_by_side(before, revision.data.get("messages", [])) if previous else []
        history.append(
            {
                "revision": revision,
                "rows": [{"old": _row_clipped(r["old"]), "new": _row_clipped(r["new"])} for r in rows[:REVISION_ROWS]],
                "more_rows": max(len(rows) - REVISION_ROWS, 0),
                "current": revision.version == trajectory.text_version,
            }
        )
    return history


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


def individual_reviews() -> QuerySet[Review]:
    """Decisions a person made one item at a time that still stand: the only ones agreement counts."""
    return Review.objects.filter(STANDING, bulk=False)


def _reviewed(domain=None, job=None, profile=None) -> QuerySet[Trajectory]:
    latest_review = individual_reviews().filter(trajectory=OuterRef("pk")).order_by("-id")
    latest_verdict = JudgeVerdict.objects.filter(trajectory=OuterRef("pk"), error="").order_by("-id")
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
    """Judge verdict vs the latest individual human decision over reviewed items, in three queries.

    Bulk decisions are not judgements of single items: they are counted apart (`bulk`), never as agreement.
    """
    reviewed = _reviewed(domain, job, profile)
    only_bulk = Trajectory.objects.filter(
        Exists(Review.objects.filter(STANDING, trajectory=OuterRef("pk"), bulk=True)),
        ~Exists(individual_reviews().filter(trajectory=OuterRef("pk"))),
    )
    if domain:
        only_bulk = only_bulk.filter(domain_id=domain)
    if job:
        only_bulk = only_bulk.filter(job_id=job)
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
        "bulk": only_bulk.count(),
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
            individual_reviews().filter(trajectory=OuterRef("trajectory_id")).order_by("-id").values("decision")[:1]
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


def agreement_over_time(*, domain=None, job=None, profile=None, days: int = 30) -> dict[str, list]:
    """Daily share of individual decisions that agreed with the judge's verdict, by the day of the decision."""
    since = timezone.now() - timedelta(days=days)
    reviews = individual_reviews().filter(created_at__gte=since, trajectory__judge_passed__isnull=False)
    if domain:
        reviews = reviews.filter(trajectory__domain_id=domain)
    if job:
        reviews = reviews.filter(trajectory__job_id=job)
    if profile:
        reviews = reviews.filter(trajectory__verdicts__profile_id=profile)
    agreed = Q(trajectory__judge_passed=True) & ~Q(decision=Decision.REJECT) | Q(
        trajectory__judge_passed=False, decision=Decision.REJECT
    )
    rows = (
        reviews.annotate(day=TruncDate("created_at"))
        .values("day")
        .annotate(n=Count("id"), agreed=Count("id", filter=agreed))
        .order_by("day")
    )
    return {"agreement": [(row["day"], row["agreed"] / row["n"]) for row in rows]}


# ---------------------------------------------------------------- dashboard charts


def review_progress_by_domain() -> dict[str, dict[str, int]]:
    """{domain: {status: count}} for the review progress bars."""
    progress = defaultdict(dict)
    for name, status, n in Trajectory.objects.values_list("domain__name", "status").annotate(n=Count("id")).order_by():
        progress[name][status] = n
    return dict(sorted(progress.items()))


def _slice(domain: str | None = None, job: int | None = None) -> QuerySet[Trajectory]:
    qs = Trajectory.objects.all()
    if domain:
        qs = qs.filter(domain__name=domain)
    if job:
        qs = qs.filter(job_id=job)
    return qs


def verdicts_by_domain(*, job: int | None = None) -> dict[str, dict[str, int]]:
    """{domain: {"pass" | "fail" | "none": count}} of the latest judge verdicts (of one job)."""
    by_domain = defaultdict(dict)
    rows = _slice(job=job).values_list("domain__name", "judge_passed").annotate(n=Count("id")).order_by()
    for name, passed, n in rows:
        by_domain[name][{True: "pass", False: "fail", None: "none"}[passed]] = n
    return dict(sorted(by_domain.items()))


def throughput_per_annotator(days: int = 14) -> dict[str, list]:
    """{reviewer: [(day, decisions)]} over the last `days` days, individual and bulk decisions alike."""
    since = timezone.now() - timedelta(days=days)
    series = defaultdict(list)
    rows = (
        Review.objects.filter(created_at__gte=since, undone_at__isnull=True)
        .annotate(day=TruncDate("created_at"))
        .values_list("reviewer__username", "day")
        .annotate(n=Count("id"))
        .order_by("reviewer__username", "day")
    )
    for username, day, n in rows:
        series[username].append((day, n))
    return dict(series)


def score_histogram(*, domain: str | None = None, job: int | None = None, bins: int = 10) -> list[tuple]:
    """[(low, high, count)] of judge scores in [0, 1] (of one domain and/or job)."""
    counts = dict(
        _slice(domain, job)
        .filter(judge_score__isnull=False)
        .annotate(bin=Least(Floor(F("judge_score") * bins), Value(float(bins - 1))))
        .values_list("bin")
        .annotate(n=Count("id"))
        .order_by()
    )
    return [(i / bins, (i + 1) / bins, counts.get(i, 0)) for i in range(bins)]
