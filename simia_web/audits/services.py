"""Writes of audits: create one (freeze the population, draw the sample), claim its next item, turn blind mode
on or off, and accept the rest of the population on its evidence.

Decisions on the sampled items are ordinary review decisions (curation.services.review_decide); nothing here
writes one itself except "accept the rest", which goes through curation's bulk path and names the audit on every
decision it writes.
"""

import functools
import secrets
from typing import Any

import numpy as np
from django.db import transaction
from django.db.models import Q, QuerySet

from simia_web.accounts.models import default_workspace_id, owner_workspace_id
from simia_web.accounts.scoping import scoped
from simia_web.core.errors import ValidationFailed
from simia_web.core.services import audit_record
from simia_web.curation.filters import TrajectoryFilter
from simia_web.curation.models import PENDING_STATUSES, Decision, Trajectory
from simia_web.curation.selectors.queue import queue_filterset
from simia_web.curation.services import (
    BulkSelection,
    bulk_selection_register,
    reviews_bulk,
    reviews_bulk_queue,
    trajectory_claim_next,
)
from simia_web.simulation.judge import CRITERIA

from . import sampling
from .models import Acceptance, Audit, AuditItem, AuditPopulation, Strategy
from .population import Population, population_read
from .selectors import audit_estimate, audit_queue

# Filters of the queue that do not describe a population: `mine` depends on who asks.
NOT_A_POPULATION = frozenset({"mine"})
POPULATION_FILTERS = tuple(name for name in TrajectoryFilter.base_filters if name not in NOT_A_POPULATION)
# An audit's rest accepted within the request up to this many members; a larger one runs as a bulk-decision job.
ACCEPT_IN_REQUEST_MAX = 1_000
SEED_MAX = 2**63 - 1
SELECTION = "audit"  # the bulk selection of an audit's unchanged members (curation.services.BULK_SELECTIONS)


def filter_values_clean(filters: dict) -> dict[str, str]:
    """Filter values as the queue's filterset takes them in a query string: empty ones left out, a list joined
    with commas, a boolean as true or false, anything else as its text. Audits and exports store them so."""
    cleaned: dict[str, str] = {}
    for name, value in filters.items():
        if value is None or value == "":
            continue
        if isinstance(value, list):
            value = ",".join(str(v) for v in value)
        elif isinstance(value, bool):
            value = "true" if value else "false"
        cleaned[name] = str(value)
    return cleaned


def audit_filters_clean(filters: Any) -> dict[str, str]:
    """The filters as stored on an audit: the queue's names only, string values; the status defaults to the
    queue's (`pending`: waiting for review). A 400 names an unknown filter, or a value that does not validate."""
    if filters is None:
        filters = {}
    if not isinstance(filters, dict):
        raise ValidationFailed("an object of trajectory filters, as GET /api/v1/trajectories/ takes them", "filters")
    unknown = sorted(set(filters) - set(POPULATION_FILTERS))
    if unknown:
        raise ValidationFailed(
            f"unknown filter {', '.join(map(str, unknown))}; use {', '.join(sorted(POPULATION_FILTERS))}", "filters"
        )
    cleaned = filter_values_clean(filters)
    filterset = _filterset(cleaned)
    if not filterset.is_valid():
        name, errors = next(iter(filterset.errors.items()))
        raise ValidationFailed(" ".join(str(e) for e in errors), f"filters.{name}")
    return cleaned


def _filterset(filters: dict[str, str]) -> TrajectoryFilter:
    return queue_filterset(params=dict(filters), request=None)


def audit_population(filters: dict[str, str], *, workspace_id: int) -> QuerySet[Trajectory]:
    """The trajectories of the workspace an audit with these (cleaned) filters covers now: the queue's, less the
    empty and errored conversations, which are never accepted and so never audited."""
    return scoped(_filterset(filters).qs, [workspace_id]).filter(reviewable=True)


def _strategy_clean(strategy: Any) -> str:
    if strategy not in Strategy.values:
        raise ValidationFailed(f"unknown strategy {strategy!r}; choose from {', '.join(Strategy.values)}", "strategy")
    return strategy


def _positive_int(value: Any, field: str, *, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        try:
            value = int(str(value))
        except ValueError:
            raise ValidationFailed("a whole number", field) from None
    if not low <= value <= high:
        raise ValidationFailed(f"at least {low} and at most {high}", field)
    return value


def members_risk(members: Population) -> np.ndarray:
    """Each member's rejection risk (sampling.rejection_risk) from what the population read holds of it."""
    return sampling.rejection_risk(
        judge_score=members.judge_score,
        judge_confidence=members.judge_confidence,
        judge_failed=members.judge_failed,
        criterion_spread=members.criterion_spread,
        violations=members.violations,
        has_duplicates=members.has_duplicates,
    )


def _criterion_sums(members: Population) -> dict[str, dict]:
    sums = {}
    for criterion, failed in members.criterion_failed.items():
        scored = ~np.isnan(failed)
        if scored.any():
            sums[criterion] = {"sum": float(failed[scored].sum()), "scored": int(scored.sum())}
    return sums


def _judges(members: Population) -> list[dict]:
    return [
        {"model": model, "profile": profile, "members": n} for (model, profile), n in members.judges.most_common(20)
    ]


def audit_create(
    *,
    filters: Any,
    sample_size: Any,
    strategy: Any,
    seed: Any = None,
    blind: bool = True,
    actor,
    workspace_id: int | None = None,
) -> Audit:
    """Freeze the population the filters select now in the workspace (the `default` one when None), draw the
    sample, and record both.

    Members are stored compactly (AuditPopulation) with the text version each had and the inclusion probability
    and prediction the draw gave it; only the sample has rows, in the order its items are given out. Refusals (a
    400 naming the field): an unknown filter or a value it does not take, an unknown strategy, a sample size below
    1 or above the population, and an empty population."""
    strategy = _strategy_clean(strategy)
    size = _positive_int(sample_size, "sample_size", low=1, high=2**31 - 1)
    seed = secrets.randbelow(2**31) if seed is None else _positive_int(seed, "seed", low=0, high=SEED_MAX)
    cleaned = audit_filters_clean(filters)
    workspace_id = default_workspace_id() if workspace_id is None else workspace_id
    members = population_read(audit_population(cleaned, workspace_id=workspace_id))
    n = len(members)
    if not n:
        raise ValidationFailed("no trajectory matches these filters: the population is empty", "filters")
    if size > n:
        raise ValidationFailed(f"larger than the population ({n} trajectories)", "sample_size")
    risk = members_risk(members)
    drawn = sampling.draw(strategy=strategy, risk=risk, sample_size=size, seed=seed)
    order = np.asarray(drawn.order, dtype=np.int64)
    inclusion = np.asarray(drawn.inclusion, dtype=np.float64)
    predictions = np.asarray(risk, dtype=np.float64)
    with transaction.atomic():
        audit = Audit.objects.create(
            filters=cleaned,
            strategy=strategy,
            seed=seed,
            sample_size=size,
            blind=bool(blind),
            population=n,
            prediction_sum=float(np.nansum(predictions)),
            criterion_sums=_criterion_sums(members),
            judged=int((~np.isnan(members.judge_failed)).sum()),
            judge_failed=int(np.nansum(members.judge_failed)),
            judge=_judges(members),
            created_by=actor if getattr(actor, "pk", None) else None,
            workspace_id=workspace_id,
        )
        AuditPopulation.objects.create(
            audit=audit,
            ids=AuditPopulation.packed(members.ids, "<i8"),
            text_versions=AuditPopulation.packed(members.text_versions, "<i4"),
            inclusion=AuditPopulation.packed(inclusion, "<f8"),
            predictions=AuditPopulation.packed(predictions, "<f8"),
        )
        AuditItem.objects.bulk_create(
            (
                AuditItem(
                    audit=audit,
                    trajectory_id=int(members.ids[i]),
                    position=position,
                    inclusion_probability=float(inclusion[i]),
                    text_version=int(members.text_versions[i]),
                    prediction=None if np.isnan(predictions[i]) else float(predictions[i]),
                    criteria={
                        c: float(members.criterion_failed[c][i])
                        for c in CRITERIA
                        if not np.isnan(members.criterion_failed[c][i])
                    },
                )
                for position, i in enumerate(order.tolist())
            ),
            batch_size=2_000,
        )
        audit_record(
            actor=actor,
            action="audit.create",
            target=audit,
            data={"filters": cleaned, "strategy": strategy, "seed": seed, "sample_size": size, "population": n},
        )
    return audit


def audit_blind_set(*, audit: Audit, blind: bool, actor) -> Audit:
    """Hide the judge on the audit's items until they are decided (blind), or show it."""
    Audit.objects.filter(pk=audit.pk).update(blind=blind)
    audit.blind = blind
    audit_record(actor=actor, action="audit.blind", target=audit, data={"blind": blind})
    return audit


def audit_claim_next(*, audit: Audit, user, after_position: int | None = None) -> Trajectory | None:
    """The audit's stream: let go of what `user` holds and claim the first item, in the sample's order, that no
    decision counts for yet and nobody else holds (after `after_position` when skipping, else from the head).

    The estimate counts the decided items at the head of the order, so items are given out in it."""
    if after_position is not None:
        claimed = trajectory_claim_next(queue=audit_queue(audit, after_position=after_position), user=user)
        if claimed is not None:
            return claimed
    return trajectory_claim_next(queue=audit_queue(audit), user=user)


# ---------------------------------------------------------------- accept the rest


@functools.lru_cache(maxsize=4)
def _frozen(audit_id: int) -> tuple[np.ndarray, np.ndarray]:
    """The members' ids and frozen text versions (an audit's population never changes: kept per process)."""
    population = AuditPopulation.objects.get(pk=audit_id)
    return population.array("ids"), population.array("text_versions")


def _bounds(params: dict) -> tuple[int, int] | None:
    ids, _ = _frozen(int(params["audit"]))
    return (int(ids[0]), int(ids[-1])) if len(ids) else None


def audit_rest(*, audit_id: int, low: int | None = None, high: int | None = None) -> QuerySet[Trajectory]:
    """The members (ids in [low, high)) that nobody has decided and whose text is the one frozen: what "accept the
    rest" accepts."""
    ids, versions = _frozen(audit_id)
    start, stop = 0, len(ids)
    if low is not None:
        start = int(np.searchsorted(ids, low, side="left"))
    if high is not None:
        stop = int(np.searchsorted(ids, high, side="left"))
    ids, versions = ids[start:stop], versions[start:stop]
    same = Q(pk__in=[])
    for version in np.unique(versions).tolist():
        same |= Q(pk__in=ids[versions == version].tolist(), text_version=version)
    return Trajectory.objects.filter(same, status__in=PENDING_STATUSES)


def _selection(params: dict, low: int, high: int) -> QuerySet[Trajectory]:
    return audit_rest(audit_id=int(params["audit"]), low=low, high=high)


bulk_selection_register(SELECTION, BulkSelection(bounds=_bounds, trajectories=_selection))


def _ceiling_clean(value: Any, field: str = "max_error_rate") -> float:
    try:
        ceiling = float(value)
    except (TypeError, ValueError):
        raise ValidationFailed("a share between 0 and 1, such as 0.05", field) from None
    if not 0 < ceiling <= 1:
        raise ValidationFailed("a share above 0 and at most 1, such as 0.05", field)
    return ceiling


def audit_ceiling_check(*, audit: Audit, max_error_rate: Any, field: str = "max_error_rate") -> dict:
    """The audit's estimate when its upper bound is at or below the ceiling; else a 400 naming the bound and the
    ceiling (and when nothing has been decided, saying so)."""
    ceiling = _ceiling_clean(max_error_rate, field)
    estimate = audit_estimate(audit)
    interval = estimate.headline
    if interval is None:
        raise ValidationFailed(
            f"Audit {audit.pk} has no estimate yet (no decision counts): its upper bound is unknown, so it cannot "
            f"be held to the ceiling {ceiling:.1%}.",
            field,
        )
    if interval.high > ceiling:
        raise ValidationFailed(
            f"Refused: audit {audit.pk}'s upper bound {interval.high:.1%} ({interval.confidence:.0%} interval, "
            f"{interval.method}) is above the ceiling {ceiling:.1%}. Decide more items to narrow it "
            f"({estimate.counted} decisions count now).",
            field,
        )
    return {"ceiling": ceiling, "estimate": estimate}


def audit_accept_rest(*, audit: Audit, max_error_rate: Any, actor) -> Acceptance:
    """Accept every member nobody decided whose text is unchanged since the freeze, on the audit's evidence:
    refused while the estimate's upper bound is above `max_error_rate`. Through curation's bulk path (held items
    and decided items are left; a bulk-decision job past ACCEPT_IN_REQUEST_MAX members); every decision it writes
    names the audit."""
    checked = audit_ceiling_check(audit=audit, max_error_rate=max_error_rate)
    ceiling, interval = checked["ceiling"], checked["estimate"].headline
    reason = (
        f"Accepted on the evidence of audit {audit.pk}: a person would reject at most {interval.high:.1%} of its "
        f"population ({interval.confidence:.0%} upper bound, {interval.method}), under the ceiling {ceiling:.1%}."
    )
    with transaction.atomic():
        acceptance = Acceptance(
            audit=audit,
            max_error_rate=ceiling,
            high=interval.high,
            estimate=checked["estimate"].interval_data(interval),
            created_by=actor,
        )
        if audit.population <= ACCEPT_IN_REQUEST_MAX:
            outcome = reviews_bulk(
                trajectories=audit_rest(audit_id=audit.pk),
                reviewer=actor,
                decision=Decision.ACCEPT,
                reason=reason,
                audit=audit.pk,
            )
            acceptance.accepted, acceptance.batch = outcome.changed, outcome.batch
        else:
            acceptance.job = reviews_bulk_queue(
                reviewer=actor,
                decision=Decision.ACCEPT,
                reason=reason,
                selection={"name": SELECTION, "audit": audit.pk},
                audit=audit.pk,
                workspace_id=owner_workspace_id(audit),
            )
            acceptance.batch = acceptance.job.params["batch"]
        acceptance.save()
        audit_record(
            actor=actor,
            action="audit.accept_rest",
            target=audit,
            data={"max_error_rate": ceiling, "high": interval.high, "accepted": acceptance.accepted},
        )
    return acceptance
