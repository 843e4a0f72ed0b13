"""Rollups: the counts behind the dashboard and the agreement page, kept in the transaction of every write that
changes them, so those pages read a few hundred rows whatever the number of trajectories.

Each trajectory adds to rollup rows through its facts: its domain, job, status, verdict and score; the decision
standing on it (once confirmed, where the reviewer stage holds it) and, when a person made it alone, its latest
verdict's profile and criterion scores; the decisions made on it and not undone; the codes of the rules it breaks. A
write takes those shares of the trajectories it touches, after locking them and again after writing
(`RollupChange`), and adds the difference. Rule violations are written once, with the trajectory (`rollups_add`),
and never change, so a later write leaves their share alone and does not read them.

Two rebuilds count every trajectory from scratch, with the same result. `rollups_rebuild` (manage.py rebuild_rollups)
replaces the rows in one transaction that writers wait for. A rebuild job (`rollups_rebuild_queue`, its kind in
curation.job_kinds.rollups_rebuild) counts in units any worker takes, each a group of whole domains, while writers
carry on: every rollup row belongs to one domain, and a unit reads its domains' rows and recounts their trajectories
in one snapshot. What they differ by is what the rows are wrong by, and no write changes it (each adds exactly the
difference it makes to the facts it changes, in the transaction that changes them), so adding it to the rows at any
later moment makes them the recount of that moment (`rollups_correction`). One rebuild runs at a time: a correction
counted before another rebuild and added after it would take the error away twice.
"""

import math
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from datetime import date, datetime

from django.db import connection, transaction
from django.db.models import Count, F, Max, Q
from django.utils import timezone

from simia_web.catalog.models import Domain
from simia_web.core.errors import Conflict
from simia_web.core.expressions import AmongIds
from simia_web.jobs.models import ACTIVE_JOB_STATUSES, Job
from simia_web.jobs.services import job_create

from .models import (
    SETTLED_ONE_BY_ONE,
    UNDATED,
    WAITING_FOR_REVIEWER,
    Decision,
    Figure,
    JudgeVerdict,
    Review,
    ReviewStage,
    Rollup,
    RuleViolation,
    Trajectory,
)

SCORE_BINS = 10
# The outcomes of a second look an annotator's decision counts under in Figure.SECOND_LOOK.
SETTLED_STAGES = frozenset({*SETTLED_ONE_BY_ONE, ReviewStage.BULK})
_UPSERT_ROWS = 500
_REBUILD_CHUNK = 5000

# (figure, domain, job, profile, reviewer, day, label): the columns of the rollup's unique key, in its order.
type Key = tuple[str, int, int, int, int, date | None, str]
KEY_COLUMNS = ("figure", "domain_id", "job", "profile", "reviewer", "day", "label")
# The job kind of curation.job_kinds.rollups_rebuild: a rebuild in units of whole domains, on any worker.
ROLLUPS_JOB_KIND = "rollups-rebuild"


def score_bin(score: float) -> int:
    """The histogram bin of a judge score in [0, 1] (1.0 falls in the last bin)."""
    return min(math.floor(score * SCORE_BINS), SCORE_BINS - 1)


def _day(moment: datetime):
    """The day a decision counts in: the default time zone's, whoever's request made it."""
    return timezone.localdate(moment, timezone.get_default_timezone())


def _criterion_scores(scores) -> dict[str, float]:
    """The judge's numeric score per criterion (a criterion may be a number or {"score": number, ...})."""
    numeric = {}
    for name, value in (scores or {}).items():
        if isinstance(value, dict):
            value = value.get("score")
        if isinstance(value, int | float) and not isinstance(value, bool):
            numeric[str(name)[: Rollup._meta.get_field("label").max_length]] = float(value)
    return numeric


# What `_count` reads of a trajectory, and of a decision not undone.
TRAJECTORY_FACTS = ("pk", "domain_id", "job_id", "status", "judge_passed", "judge_score")
REVIEW_FACTS = ("trajectory_id", "reviewer_id", "created_at", "decision", "bulk", "superseded_at", "stage")


def _label(text: str) -> str:
    return text[: Rollup._meta.get_field("label").max_length]


def _among(column: str, ids: list[int]) -> Q:
    """`column` is one of `ids` (not empty), sent as one array, and between the lowest and the highest of them: for
    thousands of ids far apart (a domain's among the others'), PostgreSQL reads the index between them rather than
    the whole table."""
    return Q(AmongIds(F(column), ids), **{f"{column}__gte": min(ids), f"{column}__lte": max(ids)})


def _shares(trajectory_ids: list[int], *, violations: bool = False) -> dict[Key, list]:
    """{key: [count, sum]} the trajectories add to the rollups, in three queries whatever their number; with
    `violations`, their rule violations' share too (a fourth)."""
    if not trajectory_ids:
        return _count([], [], {})
    trajectories = list(Trajectory.objects.filter(_among("pk", trajectory_ids)).values_list(*TRAJECTORY_FACTS))
    if not trajectories:
        return _count([], [], {})
    codes: defaultdict[int, set[str]] = defaultdict(set)
    if violations:
        unfixed = RuleViolation.objects.filter(_among("trajectory_id", trajectory_ids), fixed=False)
        for pk, code in unfixed.values_list("trajectory_id", "code").order_by():
            codes[pk].add(code)
    standing = Review.objects.filter(_among("trajectory_id", trajectory_ids), undone_at__isnull=True)
    reviews = list(standing.order_by("id").values_list(*REVIEW_FACTS))
    judged = {pk for pk, *_, passed, _ in trajectories if passed is not None}
    decided = [pk for pk, _, _, _, bulk, superseded_at, _ in reviews if pk in judged and not bulk and not superseded_at]
    if not decided:
        return _count(trajectories, reviews, {}, codes)
    latest = JudgeVerdict.objects.filter(_among("trajectory_id", decided), error="").values("trajectory_id")
    verdicts = JudgeVerdict.objects.filter(pk__in=latest.annotate(latest=Max("id")).values("latest"))
    rows = verdicts.values_list("trajectory_id", "profile_id", "scores")
    return _count(trajectories, reviews, {pk: (profile or 0, scores) for pk, profile, scores in rows}, codes)


def _count(
    trajectories: list[tuple],
    reviews: list[tuple],
    verdicts: dict[int, tuple],
    codes: Mapping[int, Iterable[str]] | None = None,
) -> dict[Key, list]:
    """{key: [count, sum]} of trajectories (TRAJECTORY_FACTS), their decisions not undone (REVIEW_FACTS, oldest
    first), the profile and scores of their latest verdict ({trajectory: (profile id or 0, scores)}) and, when
    given, the codes of the rules they break ({trajectory: codes})."""
    shares: defaultdict[Key, list] = defaultdict(lambda: [0, 0.0])
    where = {pk: (domain, job or 0) for pk, domain, job, *_ in trajectories}
    standing, bulk_only_ids = defaultdict(list), set()
    for pk, reviewer, created_at, decision, bulk, superseded_at, stage in reviews:
        domain, job = where[pk]
        shares[(Figure.DECISIONS, domain, job, 0, reviewer, _day(created_at), "")][0] += 1
        if stage in SETTLED_STAGES:  # the reviewer stage's outcome for this annotator
            shares[(Figure.SECOND_LOOK, domain, 0, 0, reviewer, UNDATED, stage)][0] += 1
        # It stands, and counts unless it still waits for a reviewer; the latest individual one is the answer.
        if superseded_at is None and stage not in WAITING_FOR_REVIEWER:
            if bulk:
                bulk_only_ids.add(pk)
            else:
                standing[pk].append((created_at, decision))
    bulk_only_ids -= standing.keys()
    for pk, domain, job, status, passed, score in trajectories:
        job = job or 0
        shares[(Figure.STATUS, domain, job, 0, 0, UNDATED, status)][0] += 1
        for code in set((codes or {}).get(pk, ())):
            shares[(Figure.VIOLATION, domain, 0, 0, 0, UNDATED, _label(code))][0] += 1
        verdict = {True: "pass", False: "fail", None: "none"}[passed]
        shares[(Figure.VERDICT, domain, job, 0, 0, UNDATED, verdict)][0] += 1
        if score is not None:
            shares[(Figure.SCORE, domain, job, 0, 0, UNDATED, str(score_bin(score)))][0] += 1
        if pk in bulk_only_ids:
            shares[(Figure.BULK_ONLY, domain, job, 0, 0, UNDATED, "")][0] += 1
        if passed is None or pk not in standing:
            continue
        profile, scores = verdicts.get(pk, (0, {}))
        for created_at, decision in standing[pk]:
            agreed = "agreed" if passed == (decision != Decision.REJECT) else "disagreed"
            shares[(Figure.AGREEMENT_DAY, domain, job, profile, 0, _day(created_at), agreed)][0] += 1
        accepted = standing[pk][-1][1] != Decision.REJECT
        cell = f"{verdict}_{'accept' if accepted else 'reject'}"
        shares[(Figure.AGREEMENT, domain, job, profile, 0, UNDATED, cell)][0] += 1
        side = Figure.CRITERION_ACCEPTED if accepted else Figure.CRITERION_REJECTED
        for name, value in _criterion_scores(scores).items():
            share = shares[(side, domain, job, profile, 0, UNDATED, name)]
            share[0] += 1
            share[1] += value
    return shares


def _add(delta: dict[Key, list]) -> None:
    """Add counts and sums to the rollup rows, creating the missing ones: upserts in key order, so two writers
    touching the same rows lock them in the same order."""
    rows = sorted((key, n, total) for key, (n, total) in delta.items() if n or total)
    table = connection.ops.quote_name(Rollup._meta.db_table)
    columns = "figure, domain_id, job, profile, reviewer, day, label"
    with connection.cursor() as cursor:
        for start in range(0, len(rows), _UPSERT_ROWS):
            batch = rows[start : start + _UPSERT_ROWS]
            params = []
            for (figure, domain, job, profile, reviewer, day, label), n, total in batch:
                day_value = connection.ops.adapt_datefield_value(day)
                params += [str(figure), domain, job, profile, reviewer, day_value, label, n, total]
            values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(batch))
            cursor.execute(
                f"INSERT INTO {table} ({columns}, n, total) VALUES {values} ON CONFLICT ({columns}) "
                f"DO UPDATE SET n = {table}.n + excluded.n, total = {table}.total + excluded.total",
                params,
            )


class RollupChange:
    """The rollups' share of some trajectories as it is before a write; `record()` after the write adds the
    difference. Take it once the trajectories are locked, inside the write's transaction."""

    def __init__(self, trajectory_ids):
        self.ids = sorted(set(trajectory_ids))
        self.before = _shares(self.ids)

    def record(self) -> None:
        delta = _shares(self.ids)
        for key, (n, total) in self.before.items():
            delta[key][0] -= n
            delta[key][1] -= total
        _add(delta)


def rollups_add(trajectory: Trajectory, violation_codes: Iterable[str] = ()) -> None:
    """Count a trajectory just written, before anyone decided it (it was in no rollup), from its fields and the codes
    of the rules it breaks (unfixed) alone."""
    facts = [tuple(getattr(trajectory, name) for name in TRAJECTORY_FACTS)]
    _add(_count(facts, [], {}, {trajectory.pk: violation_codes}))


def _counted(chunks: Iterable[list[int]], progress: Callable[[int], None] | None = None) -> dict[Key, list]:
    """The shares of the trajectories of `chunks` (lists of ids), summed; `progress` is told the trajectories
    counted after each chunk."""
    counted: defaultdict[Key, list] = defaultdict(lambda: [0, 0.0])
    done = 0
    for ids in chunks:
        for key, (n, total) in _shares(ids, violations=True).items():
            counted[key][0] += n
            counted[key][1] += total
        done += len(ids)
        if progress is not None:
            progress(done)
    return counted


def _every_trajectory() -> Iterator[list[int]]:
    last = 0
    while ids := list(
        Trajectory.objects.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:_REBUILD_CHUNK]
    ):
        yield ids
        last = ids[-1]


def rollups_count() -> dict[Key, list]:
    """Every trajectory's share, counted from scratch: what the rollups must hold."""
    return _counted(_every_trajectory())


def _rebuild_alone() -> None:
    """Inside a transaction: take the rollup table from writers until it ends (on PostgreSQL; a SQLite transaction
    holds the whole database once it writes), and refuse while a rebuild job is queued or running."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"LOCK TABLE {Rollup._meta.db_table} IN SHARE ROW EXCLUSIVE MODE")
    running = Job.objects.filter(kind=ROLLUPS_JOB_KIND, status__in=ACTIVE_JOB_STATUSES).first()
    if running is not None:
        raise Conflict(f"Job {running.pk} is rebuilding the rollups already; wait for it or cancel it.")


@transaction.atomic
def rollups_rebuild() -> int:
    """Replace the rollups with a full recount; returns the number of rows. Writers wait until it commits (their
    changes then add to the recount, which saw the trajectories as they were before them). Refused (Conflict) while
    a rebuild job is queued or running."""
    _rebuild_alone()
    Rollup.objects.all().delete()
    counted = rollups_count()
    _add(counted)
    return sum(1 for n, total in counted.values() if n or total)


def rollups_rebuild_queue(*, trajectories_per_unit: int, actor=None) -> Job:
    """Queue a rebuild as a job whose units (groups of whole domains of about `trajectories_per_unit` trajectories,
    see rollups_units) any worker takes; writers carry on while it runs. Refused (Conflict) while another rebuild
    job is queued or running; a rebuild in one transaction that is running is waited for."""
    with transaction.atomic():
        _rebuild_alone()
        return job_create(kind=ROLLUPS_JOB_KIND, params={"trajectories_per_unit": trajectories_per_unit}, actor=actor)


def rollups_units(*, trajectories_per_unit: int) -> list[list[int]]:
    """Every domain's id once, in groups of about `trajectories_per_unit` trajectories in id order: a domain is never
    split (its rollup rows are corrected from one snapshot of all its trajectories, see rollups_correction), and one
    larger than that is a group of its own. Domains without trajectories are in a group too: their rows go to zero."""
    sizes = dict(Trajectory.objects.order_by().values_list("domain_id").annotate(n=Count("pk")))
    groups: list[list[int]] = [[]]
    size = 0
    for domain in Domain.objects.order_by("pk").values_list("pk", flat=True):
        trajectories = sizes.get(domain, 0)
        if groups[-1] and size + trajectories > trajectories_per_unit:
            groups.append([])
            size = 0
        groups[-1].append(domain)
        size += trajectories
    return [group for group in groups if group]


@contextmanager
def _one_snapshot() -> Iterator[None]:
    """A transaction whose reads all see the database as it was at the first of them: REPEATABLE READ on PostgreSQL
    (a SQLite transaction's reads always do). Inside a caller's transaction, the caller's."""
    outermost = not connection.in_atomic_block
    with transaction.atomic():
        if outermost and connection.vendor == "postgresql":
            with connection.cursor() as cursor:
                cursor.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        yield


class RollupCorrection:
    """What some domains' rollup rows were wrong by: their trajectories' recount less the rows, read in one snapshot.
    Called (in the transaction that finishes a rebuild's unit, once), it adds that to the rows, which makes them the
    recount whatever writers changed since: each write added exactly the difference it made."""

    def __init__(self, *, domain_ids: list[int], difference: dict[Key, list], trajectories: int):
        self.domain_ids, self.difference, self.trajectories = domain_ids, difference, trajectories

    def __call__(self) -> dict:
        _add(self.difference)
        return {
            "domains": len(self.domain_ids),
            "trajectories": self.trajectories,
            "rows_corrected": sum(1 for n, total in self.difference.values() if n or total),
        }


def rollups_correction(
    *, domain_ids: list[int], progress: Callable[[int, int], None] | None = None
) -> RollupCorrection:
    """Recount the trajectories of the domains `domain_ids` and read their rollup rows, in one snapshot, and return
    the correction that makes the rows the recount; `progress` is told (trajectories counted, of how many) as chunks
    are counted. Slow, and writes nothing: a rebuild job's unit runs it outside the transaction that records it."""
    with _one_snapshot():
        stored = list(Rollup.objects.filter(domain_id__in=domain_ids).values_list(*KEY_COLUMNS, "n", "total"))
        ids = list(Trajectory.objects.filter(domain_id__in=domain_ids).order_by("pk").values_list("pk", flat=True))
        chunks = (ids[start : start + _REBUILD_CHUNK] for start in range(0, len(ids), _REBUILD_CHUNK))
        if progress is not None:
            progress(0, len(ids))
        difference = _counted(chunks, None if progress is None else lambda done: progress(done, len(ids)))
    for *key, n, total in stored:
        share = difference[tuple(key)]
        share[0] -= n
        share[1] -= total
    return RollupCorrection(domain_ids=domain_ids, difference=difference, trajectories=len(ids))


def rollups_rows() -> int:
    """The rollup rows that hold a count or a sum."""
    return Rollup.objects.exclude(n=0, total=0).count()
