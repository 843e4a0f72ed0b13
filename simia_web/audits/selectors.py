"""Reads of audits: the list, the estimate (with its trace as decisions arrived, per criterion, and the members
edited since the freeze), the audit's queue, an item's place in it, and the block a certified snapshot carries.

An estimate costs a bounded number of queries over the sample only (its items, the decisions on them, the text
revisions made since the freeze, the criterion ratings): never over the population, whose figures were frozen."""

import functools
import math
from dataclasses import dataclass, field

import numpy as np
from django.contrib.contenttypes.models import ContentType
from django.db.models import Exists, F, OuterRef, QuerySet

from simia_web.accounts.scoping import scoped
from simia_web.calibration.models import CriterionRating
from simia_web.core.models import Revision
from simia_web.curation.models import STANDING, Decision, GoldItem, Review, ReviewStage, Trajectory
from simia_web.simulation.judge import CRITERIA, PASS_THRESHOLD

from . import estimation
from .estimation import Interval
from .models import Acceptance, Audit, AuditItem

CONFIDENCE = 0.95
HALF_WIDTH = 0.02  # the target of "decisions still needed": ±2 points
TRACE_POINTS = 30  # the plot's points at most
EDITED_SHOWN = 50
# Decisions that say the text as frozen would not be accepted as it stands: a rejection, and a fix (what was
# accepted is not the text frozen; "accept the rest" accepts members as they stand).
REJECTING = frozenset({Decision.REJECT, Decision.FIX_ACCEPT})


def audits_list(*, workspace_ids: list[int]) -> QuerySet[Audit]:
    return scoped(Audit.objects.select_related("created_by"), workspace_ids).order_by("-id")


def audit_in(*, workspace_ids: list[int], pk: int) -> Audit | None:
    """The audit `pk` if one of the workspaces owns it (another workspace's is as good as missing)."""
    return audits_list(workspace_ids=workspace_ids).filter(pk=pk).first()


def counted_reviews(audit: Audit) -> QuerySet[Review]:
    """The decisions that count for an audit: people's own (not bulk), not undone, made since the audit was created,
    on its sampled items. A decision superseded by a later edit still counts for the text it was made on. Where the
    reviewer stage holds an annotator's decision, the reviewer's decision that settles it counts, not the
    annotator's (awaiting, confirmed, fixed or overturned); where annotators' votes decide an item, the decision
    their votes make counts."""
    return Review.objects.filter(
        trajectory_id__in=AuditItem.objects.filter(audit=audit).values("trajectory_id"),
        bulk=False,
        undone_at__isnull=True,
        created_at__gte=audit.created_at,
        stage__in=(ReviewStage.NONE, ReviewStage.CONSENSUS),
    )


def audit_queue(audit: Audit, *, after_position: int | None = None) -> QuerySet[Trajectory]:
    """The audit's items that no decision counts for yet, in the order they are given out (`audit_position`);
    those after `after_position` when given. A gold item counts with its expected answer (`_decisions`): nobody is
    given it."""
    counted = Review.objects.filter(
        trajectory=OuterRef("pk"), bulk=False, undone_at__isnull=True, created_at__gte=audit.created_at
    )
    place = {} if after_position is None else {"audit_items__position__gt": after_position}
    return (
        Trajectory.objects.filter(audit_items__audit=audit, **place)  # one filter(): one join to the items
        .annotate(audit_position=F("audit_items__position"))
        .exclude(Exists(counted))
        .exclude(Exists(GoldItem.objects.filter(trajectory=OuterRef("pk"))))
        .order_by("audit_position")
    )


@dataclass
class ItemState:
    position: int
    trajectory_id: int
    inclusion: float
    prediction: float | None
    text_version: int  # at the freeze
    current_text_version: int
    criteria: dict  # the judge's predicted failure per criterion at the freeze (read for rated items only)
    review_id: int | None = None
    decision: str | None = None
    decided_text_version: int | None = None  # the text the counted decision was made on
    ratings: dict = field(default_factory=dict)  # {criterion: mean grade} of the text decided

    @property
    def label(self) -> int | None:
        return None if self.decision is None else int(self.decision in REJECTING)

    @property
    def edited(self) -> bool:
        """Its text changed after the freeze (before the decision, when decided: a fix the decision made itself
        is not an edit of what was decided)."""
        if self.decided_text_version is not None:
            return self.decided_text_version != self.text_version
        return self.current_text_version != self.text_version


@functools.lru_cache(maxsize=64)
def _sample(audit_id: int) -> tuple[tuple, ...]:
    """The sample's rows as frozen (position, trajectory, inclusion probability, prediction, text version): they
    never change once the audit is created, so a process reads them once."""
    rows = AuditItem.objects.filter(audit_id=audit_id).order_by("position")
    return tuple(rows.values_list("position", "trajectory_id", "inclusion_probability", "prediction", "text_version"))


def _items(audit: Audit) -> list[ItemState]:
    return [
        ItemState(position, trajectory_id, inclusion, prediction, text_version, text_version, {})
        for position, trajectory_id, inclusion, prediction, text_version in _sample(audit.pk)
    ]


def _decisions(audit: Audit, items: dict[int, ItemState]) -> None:
    """Each item's counted decision (the latest of people's own that was not undone; for a gold item nobody decided
    since, its expected answer: the known truth), and the texts written since the freeze."""
    rows = (
        counted_reviews(audit)
        .order_by("trajectory_id", "id")
        .values_list("trajectory_id", "id", "decision", "based_on_version")
    )
    gold = GoldItem.objects.filter(trajectory_id__in=AuditItem.objects.filter(audit=audit).values("trajectory_id"))
    for trajectory_id, expected in gold.values_list("trajectory_id", "expected_decision"):
        items[trajectory_id].decision = expected
        items[trajectory_id].decided_text_version = items[trajectory_id].text_version
    based_on: dict[int, int | None] = {}
    for trajectory_id, review_id, decision, version in rows:
        item = items[trajectory_id]
        item.review_id, item.decision = review_id, decision
        item.decided_text_version = item.text_version
        based_on[trajectory_id] = version
    _texts(audit, items, based_on)


def _texts(audit: Audit, items: dict[int, ItemState], based_on: dict[int, int | None]) -> None:
    """The texts written on the sampled items since the freeze, from their revisions (every text a person writes,
    edit, fix, revert or undo of a fix, is recorded as a revision at the version it makes the text version): each
    item's text version now, and the text each decision was made on (the latest written up to the version the person
    was looking at)."""
    revisions = Revision.objects.filter(
        content_type=ContentType.objects.get_for_model(Trajectory),
        object_id__in=AuditItem.objects.filter(audit=audit).values("trajectory_id"),
    ).values_list("object_id", "version")
    for object_id, version in revisions:
        item = items[object_id]
        if version <= item.text_version:
            continue
        item.current_text_version = max(item.current_text_version, version)
        looked_at = based_on.get(object_id)
        if looked_at is not None and version <= looked_at:
            item.decided_text_version = max(item.decided_text_version or 0, version)


def _ratings(audit: Audit, decided: list[ItemState]) -> None:
    """People's criterion ratings of the text each decision was made on (the mean when several rated it), with the
    judge's predicted failures per criterion of the items rated."""
    if not decided:
        return
    by_id = {item.trajectory_id: item for item in decided}
    sums: dict[int, dict[str, list[float]]] = {}
    sampled = AuditItem.objects.filter(audit=audit).values("trajectory_id")
    rows = CriterionRating.objects.filter(trajectory_id__in=sampled).values_list(
        "trajectory_id", "trajectory_version", "scores"
    )
    for trajectory_id, version, scores in rows:
        if trajectory_id not in by_id or version != by_id[trajectory_id].decided_text_version:
            continue
        for criterion, grade in (scores or {}).items():
            if criterion in CRITERIA and isinstance(grade, (int, float)):
                sums.setdefault(trajectory_id, {}).setdefault(criterion, []).append(float(grade))
    for trajectory_id, criteria in sums.items():
        by_id[trajectory_id].ratings = {c: sum(g) / len(g) for c, g in criteria.items()}
    if sums:
        predicted = AuditItem.objects.filter(audit=audit, trajectory_id__in=list(sums))
        for trajectory_id, criteria in predicted.values_list("trajectory_id", "criteria"):
            by_id[trajectory_id].criteria = criteria or {}


@dataclass
class AuditEstimate:
    audit: Audit
    items: list[ItemState]
    decided: list[ItemState]
    estimate: Interval | None  # prediction-powered
    human_only: Interval | None
    needed: int | None  # more decisions for ±HALF_WIDTH
    per_criterion: dict[str, dict]
    judge_only: float
    trace: list[dict]

    @property
    def counted(self) -> int:
        return len(self.decided)

    @property
    def rejected(self) -> int:
        return sum(item.label or 0 for item in self.decided)

    @property
    def headline(self) -> Interval | None:
        """The interval an acceptance and a certificate are held to: the prediction-powered one."""
        return self.estimate or self.human_only

    @property
    def edited(self) -> list[ItemState]:
        return [item for item in self.items if item.edited]

    @staticmethod
    def interval_data(interval: Interval | None) -> dict | None:
        if interval is None:
            return None
        return {
            "error_rate": interval.error_rate,
            "low": interval.low,
            "high": interval.high,
            "confidence": interval.confidence,
            "method": interval.method,
        }


def _intervals(
    audit: Audit, labels, inclusion, predictions, prediction_sum: float
) -> tuple[Interval | None, Interval | None]:
    """(prediction-powered, human-only) intervals from the decided items' labels, inclusion probabilities and the
    judge's predictions of them, with the predictions' sum over the population."""
    powered = estimation.prediction_powered(
        labels=labels,
        inclusion=inclusion,
        planned=audit.sample_size,
        population_size=audit.population,
        predictions_sampled=predictions,
        prediction_population_sum=prediction_sum,
        confidence=CONFIDENCE,
    )
    human = estimation.human_only(
        labels=labels,
        inclusion=inclusion,
        planned=audit.sample_size,
        population_size=audit.population,
        confidence=CONFIDENCE,
    )
    return powered, human


def _columns(decided: list[ItemState]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(labels, inclusion probabilities, predictions) of the decided items, as arrays."""
    labels = np.fromiter((item.label for item in decided), dtype=np.float64, count=len(decided))
    inclusion = np.fromiter((item.inclusion for item in decided), dtype=np.float64, count=len(decided))
    predictions = np.fromiter(
        (math.nan if item.prediction is None else item.prediction for item in decided),
        dtype=np.float64,
        count=len(decided),
    )
    return labels, inclusion, predictions


def _needed(audit: Audit, columns: tuple[np.ndarray, np.ndarray, np.ndarray]) -> int | None:
    labels, inclusion, predictions = columns
    return estimation.decisions_needed(
        labels=labels,
        inclusion=inclusion,
        planned=audit.sample_size,
        population_size=audit.population,
        predictions_sampled=predictions,
        prediction_population_sum=audit.prediction_sum,
        half_width=HALF_WIDTH,
        confidence=CONFIDENCE,
    )


# The last trace computed per audit in this process, with the decisions it was computed from: the page asks for it
# again on every view, and it changes only when a decision does.
_TRACES: dict[int, tuple[tuple, list[dict]]] = {}
TRACES_KEPT = 64


def _trace(audit: Audit, decided: list[ItemState]) -> list[dict]:
    """Both intervals as they stood after the first k decisions (in the order they were made), for the plot."""
    if not decided:
        return []
    by_time = sorted(decided, key=lambda item: item.review_id or 0)
    key = tuple((item.review_id, item.label) for item in by_time)
    kept = _TRACES.get(audit.pk)
    if kept is not None and kept[0] == key:
        return kept[1]
    points = _trace_points(audit, by_time)
    if len(_TRACES) >= TRACES_KEPT:
        _TRACES.pop(next(iter(_TRACES)))
    _TRACES[audit.pk] = (key, points)
    return points


def _trace_points(audit: Audit, by_time: list[ItemState]) -> list[dict]:
    labels, inclusion, predictions = _columns(by_time)
    k_values = sorted({max(1, round(k)) for k in np.linspace(1, len(labels), min(TRACE_POINTS, len(labels)))})
    points = []
    for k in k_values:
        powered, human = _intervals(audit, labels[:k], inclusion[:k], predictions[:k], audit.prediction_sum)
        points.append({"k": k, "estimate": powered, "human_only": human})
    return points


def _per_criterion(audit: Audit, decided: list[ItemState]) -> dict[str, dict]:
    """Per judge criterion, where people rated the decided items: the share of the population that fails the
    criterion in a person's eyes (a grade below the judge's pass threshold), both ways."""
    figures = {}
    for criterion in CRITERIA:
        rated = [item for item in decided if criterion in item.ratings]
        if not rated:
            continue
        sums = audit.criterion_sums.get(criterion) or {"sum": 0.0, "scored": 0}
        powered, human = _intervals(
            audit,
            [int(item.ratings[criterion] < PASS_THRESHOLD) for item in rated],
            [item.inclusion for item in rated],
            [item.criteria.get(criterion, math.nan) for item in rated],
            float(sums["sum"]),
        )
        figures[criterion] = {
            "rated": len(rated),
            "estimate": powered,
            "human_only": human,
            "judge_only": float(sums["sum"]) / audit.population,
        }
    return figures


def audit_estimate(audit: Audit, *, trace: bool = False) -> AuditEstimate:
    """The audit's figures as its decisions stand now; `trace` adds the intervals as they narrowed."""
    items = _items(audit)
    by_id = {item.trajectory_id: item for item in items}
    _decisions(audit, by_id)
    decided = [item for item in items if item.decision is not None]
    _ratings(audit, decided)
    columns = _columns(decided)
    powered, human = _intervals(audit, *columns, audit.prediction_sum)
    return AuditEstimate(
        audit=audit,
        items=items,
        decided=decided,
        estimate=powered,
        human_only=human,
        needed=_needed(audit, columns),
        per_criterion=_per_criterion(audit, decided),
        judge_only=estimation.judge_only(
            prediction_population_sum=audit.prediction_sum, population_size=audit.population
        ),
        trace=_trace(audit, decided) if trace else [],
    )


def audit_item(audit: Audit, trajectory_id: int) -> AuditItem | None:
    return AuditItem.objects.filter(audit=audit, trajectory_id=trajectory_id).first()


def item_decision(audit: Audit, trajectory_id: int) -> Review | None:
    """The decision that counts for an item of the audit (None: undecided)."""
    return counted_reviews(audit).filter(trajectory_id=trajectory_id).select_related("reviewer").order_by("-id").first()


def audit_neighbours(audit: Audit, position: int) -> tuple[int | None, int | None]:
    """The trajectories before and after a position in the sample's order."""
    items = AuditItem.objects.filter(audit=audit)
    previous = items.filter(position__lt=position).order_by("-position").values_list("trajectory_id", flat=True)
    following = items.filter(position__gt=position).order_by("position").values_list("trajectory_id", flat=True)
    return previous.first(), following.first()


def accepted_on_evidence(audit_id: int) -> QuerySet[Review]:
    """The standing decisions that rest on the audit (written by "accept the rest")."""
    return Review.objects.filter(STANDING, audit=audit_id)


def acceptances(audit: Audit) -> QuerySet[Acceptance]:
    return audit.acceptances.select_related("created_by", "job").order_by("-id")


def audit_certificate(*, audit: Audit, estimate: AuditEstimate | None = None) -> dict:
    """What a certified snapshot says about the audit it rests on (its report, card and manifest)."""
    estimate = estimate or audit_estimate(audit)
    return {
        "id": audit.pk,
        "population": audit.population,
        "filters": audit.filters,
        "strategy": audit.strategy,
        "seed": audit.seed,
        "sample_size": audit.sample_size,
        "audited": estimate.counted,
        "rejected": estimate.rejected,
        "estimate": AuditEstimate.interval_data(estimate.estimate),
        "human_only": AuditEstimate.interval_data(estimate.human_only),
        "judge_only": estimate.judge_only,
        "judge": audit.judge,
        "created_at": audit.created_at.isoformat(),
    }
