"""An audit's population read once, at the freeze, as arrays: the members' ids and text versions, and what predicts
a person's rejection of each (the judge's score, confidence and verdict, the spread of its criterion scores, rule
violations, near-duplicates), with the judge's per-criterion verdicts and configurations.

A few reads whatever the size: the members' columns (id order), their verdicts (one pass, the latest non-failed
per member kept) and the judge configurations, and the near-duplicate clusters' members. On PostgreSQL each column
comes back as one array aggregated by the database, not as a row per member. Portable fallback: elsewhere (SQLite)
the same columns are read row by row (`_members`), tested against the arrays.
"""

import warnings
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from django.contrib.postgres.aggregates import ArrayAgg
from django.db import DataError, connection, transaction
from django.db.models import FloatField, Func, QuerySet

from simia_web.core.rows import quoted_column, quoted_table
from simia_web.curation.duplicates import TRAJECTORIES
from simia_web.curation.models import JudgeVerdict
from simia_web.dedup.models import Signature
from simia_web.llm.models import EndpointProfile
from simia_web.simulation.judge import CRITERIA, PASS_THRESHOLD

# Rows fetched per round trip while the population streams in.
CHUNK = 20_000
# Up to this many members the verdicts are read row by row through the population's filter; past it, as arrays over
# the members' id range, which reads every verdict in that range (a few seconds at a million).
ROWS_AT_MOST = 20_000


class JsonNumber(Func):
    """A number stored under `key` of a JSON object column, or NULL when it is missing or not a number (a verdict's
    per-criterion score: a malformed one must not fail the read)."""

    output_field = FloatField()

    def __init__(self, column: str, key: str):
        if not key.isidentifier():
            raise ValueError(f"not a criterion name: {key!r}")
        super().__init__(column, template="")
        self.key = key

    def as_postgresql(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        return (
            f"(CASE WHEN jsonb_typeof({sql} -> %s) = 'number' THEN ({sql} ->> %s)::double precision END)",
            [*params, self.key, *params, self.key],
        )

    def as_sqlite(self, compiler, connection, **extra_context):
        sql, params = compiler.compile(self.source_expressions[0])
        path = f'$."{self.key}"'
        return (
            f"(CASE WHEN json_type({sql}, %s) IN ('integer', 'real') THEN json_extract({sql}, %s) END)",
            [*params, path, *params, path],
        )


@dataclass
class Population:
    """The members in id order; float arrays hold NaN where there is nothing (no verdict, no score)."""

    ids: np.ndarray  # int64
    text_versions: np.ndarray  # int32
    judge_score: np.ndarray
    judge_confidence: np.ndarray
    judge_failed: np.ndarray  # 1.0 failed, 0.0 passed, NaN no verdict
    violations: np.ndarray  # int64: unfixed rule violations
    has_duplicates: np.ndarray  # bool: in a near-duplicate cluster
    criterion_spread: np.ndarray  # max minus min of the latest verdict's criterion scores
    criterion_failed: dict[str, np.ndarray] = field(default_factory=dict)  # 1.0 below the pass threshold, NaN none
    judges: Counter = field(default_factory=Counter)  # (model, profile) of the members' latest verdicts

    def __len__(self) -> int:
        return len(self.ids)


def _float(values) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=np.float64)


def _members(queryset: QuerySet):
    rows = queryset.order_by("pk").values_list(
        "pk", "text_version", "judge_score", "judge_confidence", "judge_passed", "violation_count"
    )
    columns: list[list] = [[], [], [], [], [], []]
    for row in rows.iterator(chunk_size=CHUNK):
        for column, value in zip(columns, row, strict=True):
            column.append(value)
    ids = np.array(columns[0], dtype=np.int64)
    failed = np.array([np.nan if p is None else float(not p) for p in columns[4]], dtype=np.float64)
    return (
        ids,
        np.array(columns[1], dtype=np.int32),
        _float(columns[2]),
        _float(columns[3]),
        failed,
        np.array(columns[5], dtype=np.int64),
    )


def _members_arrays(queryset: QuerySet):
    """_members on PostgreSQL: each column aggregated into one array by the database (one row, no per-row objects),
    which a million members need to stay within seconds."""
    columns = ("id", "text_version", "judge_score", "judge_confidence", "judge_passed", "violation_count")
    # No ORDER BY in the aggregates (PostgreSQL 15 sorts once per aggregate): the aggregates of one query take the
    # rows in one order, so the arrays line up; they are put in id order here.
    aggregated = queryset.order_by().aggregate(**{f"all_{name}": ArrayAgg(name, default=[]) for name in columns})
    row = {name: aggregated[f"all_{name}"] for name in columns}
    ids = np.array(row["id"], dtype=np.int64)
    order = np.argsort(ids, kind="stable")
    passed = np.array(row["judge_passed"], dtype=np.float64)[order]  # True 1.0, False 0.0, None NaN
    return (
        ids[order],
        np.array(row["text_version"], dtype=np.int32)[order],
        np.array(row["judge_score"], dtype=np.float64)[order],
        np.array(row["judge_confidence"], dtype=np.float64)[order],
        1.0 - passed,
        np.array(row["violation_count"], dtype=np.int64)[order],
    )


def _verdicts_sql(*, checked: bool) -> str:
    """One row of arrays over the verdicts that did not fail of the trajectories with ids in a range: each verdict's
    member, id, model, endpoint profile, the spread of its criterion scores, and a mask of its criteria (bit i: the
    i-th criterion has a score; bit 5 + i: it is below the pass threshold). Each score is read from the JSON once
    (the inner query is kept apart with OFFSET 0, so its columns are not computed again where they are used).

    Unless `checked`, a score is cast as it is, which fails on one that is not a number (the judge's answers are
    numbers by their schema): a third faster; the checked statement reads such a score as missing."""
    table, scores = quoted_table(JudgeVerdict), quoted_column(JudgeVerdict, "scores")
    columns = [f"c{i}" for i in range(len(CRITERIA))]
    if checked:
        extracted = ", ".join(
            f"CASE WHEN jsonb_typeof({scores} -> %s) = 'number' THEN ({scores} ->> %s)::double precision END AS {c}"
            for c in columns
        )
    else:
        extracted = ", ".join(f"({scores} -> %s)::double precision AS {c}" for c in columns)
    mask = " + ".join(
        f"(CASE WHEN {c} IS NULL THEN 0 ELSE {1 << i} END) + (CASE WHEN {c} < %s THEN {1 << (5 + i)} ELSE 0 END)"
        for i, c in enumerate(columns)
    )
    return (
        "SELECT array_agg(trajectory_id), array_agg(id), array_agg(model), array_agg(profile_id), "
        "array_agg(spread), array_agg(mask) FROM ("
        f"SELECT trajectory_id, id, model, profile_id, GREATEST({', '.join(columns)}) - LEAST({', '.join(columns)}) "
        f"AS spread, {mask} AS mask FROM ("
        f"SELECT trajectory_id, id, model, profile_id, {extracted} FROM {table} "
        "WHERE error = '' AND trajectory_id BETWEEN %s AND %s OFFSET 0) AS scored) AS verdicts"
    )


def _verdicts_arrays(ids: np.ndarray):
    """_verdicts on PostgreSQL, in one statement over the members' id range (no join with the population: the
    verdicts of trajectories outside it are dropped here, by id): arrays, the last verdict of each member kept.
    Returns (criterion failures, criterion spread, judge configurations) as population_read takes them."""

    def params(checked: bool) -> list:
        named: list = [PASS_THRESHOLD] * len(CRITERIA)  # in the order the statement names them: the mask's first
        named += [key for c in CRITERIA for key in ((c, c) if checked else (c,))]
        return [*named, int(ids[0]), int(ids[-1])]

    with connection.cursor() as cursor:
        try:
            with transaction.atomic():  # a savepoint: a score that is not a number fails only this statement
                cursor.execute(_verdicts_sql(checked=False), params(False))
        except DataError:
            cursor.execute(_verdicts_sql(checked=True), params(True))
        members, verdict_ids, models, profiles, spreads, masks = (column or [] for column in cursor.fetchone())
    failed = np.full((len(CRITERIA), len(ids)), np.nan)
    spread = np.full(len(ids), np.nan)
    judges: Counter = Counter()
    if not members:
        return failed, spread, judges
    members = np.array(members, dtype=np.int64)
    order = np.lexsort((np.array(verdict_ids, dtype=np.int64), members))  # by member, then verdict id
    members = members[order]
    ends = np.r_[members[1:] != members[:-1], True]  # the last verdict of each member
    last, kept = order[ends], members[ends]
    where = np.searchsorted(ids, kept)
    inside = (where < len(ids)) & (ids[np.minimum(where, len(ids) - 1)] == kept)  # the population's members only
    last, where = last[inside], where[inside]
    spread[where] = np.array(spreads, dtype=np.float64)[last]
    mask = np.array(masks, dtype=np.int64)[last]
    for i in range(len(CRITERIA)):
        scored = (mask >> i) & 1 == 1
        failed[i, where[scored]] = ((mask[scored] >> (5 + i)) & 1).astype(np.float64)
    names = dict(EndpointProfile.objects.values_list("id", "name"))
    judges = Counter((models[i] or "", names.get(profiles[i], "") if profiles[i] else "") for i in last.tolist())
    return failed, spread, judges


def _verdicts(queryset: QuerySet, ids: np.ndarray):
    """The latest verdict that did not fail of each member, read row by row: (criterion failures: 1.0 below the
    pass threshold, 0.0 at or above it, NaN without a score, a row per criterion; the spread of its criterion
    scores; its (model, profile) counted)."""
    scores = {c: JsonNumber("scores", c) for c in CRITERIA}
    rows = (
        JudgeVerdict.objects.filter(trajectory__in=queryset.order_by().values("pk"), error="")
        .annotate(**{f"c_{c}": expression for c, expression in scores.items()})
        .order_by("trajectory_id", "id")
        .values_list("trajectory_id", "model", "profile__name", *(f"c_{c}" for c in CRITERIA))
    )
    latest: dict[int, tuple] = {}
    for row in rows.iterator(chunk_size=CHUNK):
        latest[row[0]] = row  # id order within a member: the last one stays
    n = len(ids)
    criteria = np.full((len(CRITERIA), n), np.nan)
    judges: Counter = Counter()
    if latest:
        where = np.searchsorted(ids, np.fromiter(latest, dtype=np.int64, count=len(latest)))
        values = np.array(
            [[np.nan if v is None else v for v in row[3:]] for row in latest.values()], dtype=np.float64
        ).reshape(len(latest), len(CRITERIA))
        criteria[:, where] = values.T
        judges = Counter((row[1] or "", row[2] or "") for row in latest.values())
    with warnings.catch_warnings():  # members without criterion scores get NaN, without a warning each
        warnings.simplefilter("ignore", RuntimeWarning)
        spread = np.nanmax(criteria, axis=0) - np.nanmin(criteria, axis=0)
    failed = np.where(np.isnan(criteria), np.nan, (criteria < PASS_THRESHOLD).astype(np.float64))
    return failed, spread, judges


def _clustered(ids: np.ndarray) -> np.ndarray:
    if not len(ids):
        return np.zeros(0, dtype=bool)
    clustered = Signature.objects.filter(
        corpus=TRAJECTORIES, cluster__isnull=False, item_id__gte=int(ids[0]), item_id__lte=int(ids[-1])
    ).values_list("item_id", flat=True)
    return np.isin(ids, np.fromiter(clustered.iterator(chunk_size=CHUNK), dtype=np.int64))


def population_read(queryset: QuerySet) -> Population:
    """The members of `queryset` (trajectories) as they are now."""
    arrays = connection.vendor == "postgresql"
    ids, text_versions, score, confidence, failed, violations = (_members_arrays if arrays else _members)(queryset)
    judges: Counter
    if not len(ids):
        below, spread, judges = np.full((len(CRITERIA), 0), np.nan), np.zeros(0), Counter()
    elif arrays and len(ids) > ROWS_AT_MOST:
        below, spread, judges = _verdicts_arrays(ids)
    else:
        below, spread, judges = _verdicts(queryset, ids)
    return Population(
        ids=ids,
        text_versions=text_versions,
        judge_score=score,
        judge_confidence=confidence,
        judge_failed=failed,
        violations=violations,
        has_duplicates=_clustered(ids),
        criterion_spread=spread,
        criterion_failed={c: below[i] for i, c in enumerate(CRITERIA)},
        judges=judges,
    )
