"""Writes to trajectories: creation by the pipelines, verdicts, status changes and human reviews."""

from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from simia_web.core.jsonutil import content_hash
from simia_web.core.models import AuditEvent
from simia_web.core.selectors import revision_list
from simia_web.core.services import VersionConflict, audit_record, revision_record, versioned_update

from .models import Decision, JudgeVerdict, Review, RuleViolation, Trajectory, TrajectoryStatus


def trajectory_status_for(*, violations: list, verdict: dict | None) -> str:
    """Rules first: any unfixed violation fails; then the judge decides; no verdict means generated."""
    if any(not v.fixed for v in violations):
        return TrajectoryStatus.RULES_FAILED
    if verdict is None or verdict.get("passed") is None:
        return TrajectoryStatus.GENERATED
    return TrajectoryStatus.JUDGED_PASS if verdict["passed"] else TrajectoryStatus.JUDGED_FAIL


@transaction.atomic(savepoint=False)
def trajectory_create(*, violations: list, verdict: dict | None = None, **fields) -> Trajectory:
    """Store a finished trajectory with its rule violations and judge verdict.

    `violations` are rules.Violation objects; `verdict` is the judge's answer (see judge.verdict_fields).
    """
    fields.setdefault(
        "content_hash", content_hash({"messages": fields.get("messages", []), "tools": fields.get("tools", [])})
    )
    trajectory = Trajectory.objects.create(
        status=trajectory_status_for(violations=violations, verdict=verdict),
        violation_count=sum(1 for v in violations if not v.fixed),
        **_verdict_headline(verdict),
        **fields,
    )
    RuleViolation.objects.bulk_create(
        RuleViolation(
            trajectory=trajectory, code=v.code, message_index=v.message_index, detail=v.detail[:2000], fixed=v.fixed
        )
        for v in violations
    )
    if verdict is not None:
        JudgeVerdict.objects.create(trajectory=trajectory, **verdict)
    return trajectory


def _verdict_headline(verdict: dict | None) -> dict:
    """The verdict numbers the review queue filters and orders on, copied onto the trajectory."""
    if verdict is None:
        return {}
    return {
        "judge_passed": verdict.get("passed"),
        "judge_score": verdict.get("score"),
        "judge_confidence": verdict.get("confidence"),
    }


HUMAN_STATUSES = frozenset({TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED})


def status_transition_check(*, previous: str, status: str) -> None:
    """Pipeline statuses may be replaced by anything; a human decision only by another human decision."""
    if status not in TrajectoryStatus.values:
        raise ReviewError(f"unknown status {status!r}")
    if previous in HUMAN_STATUSES and status not in HUMAN_STATUSES:
        raise ReviewError(f"a trajectory a person {previous} cannot go back to {status}")


def trajectory_status_set(*, trajectory: Trajectory, status: str, actor=None, reason: str = "") -> Trajectory:
    """Change a status (checked against the legal transitions) with an audit event in the same transaction."""
    status_transition_check(previous=trajectory.status, status=status)
    with transaction.atomic():
        previous = trajectory.status
        Trajectory.objects.filter(pk=trajectory.pk).update(status=status)
        trajectory.status = status
        audit_record(
            actor=actor,
            action="trajectory.status",
            target=trajectory,
            data={"from": previous, "to": status, "reason": reason},
        )
    return trajectory


# ---------------------------------------------------------------- human review


class ReviewError(Exception):
    """A review that cannot be applied (missing reason, invalid edit, reserved by someone else)."""


def trajectory_reserve(*, trajectory: Trajectory, user) -> bool:
    """Reserve the trajectory for `user` for SIMIA_RESERVATION_MINUTES unless someone else holds it.

    Returns True when `user` now holds the reservation. A single conditional UPDATE, so two
    annotators opening the same item at once cannot both win.
    """
    now = timezone.now()
    until = now + timedelta(minutes=settings.SIMIA_RESERVATION_MINUTES)
    free = Q(reserved_by__isnull=True) | Q(reserved_until__lt=now) | Q(reserved_by=user)
    won = Trajectory.objects.filter(free, pk=trajectory.pk).update(reserved_by=user, reserved_until=until)
    if won:
        trajectory.reserved_by, trajectory.reserved_until = user, until
    else:
        trajectory.refresh_from_db(fields=["reserved_by", "reserved_until"])
    return bool(won)


def _held_by_other(trajectory: Trajectory, user) -> bool:
    return bool(
        trajectory.reserved_by_id
        and trajectory.reserved_by_id != user.pk
        and trajectory.reserved_until
        and trajectory.reserved_until > timezone.now()
    )


def _trajectory_snapshot(trajectory: Trajectory) -> dict:
    return {"messages": trajectory.messages, "tools": trajectory.tools}


def _messages_problems(messages) -> list[str]:
    if not isinstance(messages, list) or not messages:
        return ["messages must be a non-empty JSON list"]
    problems = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") not in {"system", "user", "assistant", "tool"}:
            problems.append(f"message {i} needs a role of system, user, assistant or tool")
    return problems


STATUS_FOR_DECISION = {
    Decision.ACCEPT: TrajectoryStatus.ACCEPTED,
    Decision.FIX_ACCEPT: TrajectoryStatus.ACCEPTED,
    Decision.REJECT: TrajectoryStatus.REJECTED,
}


def review_decide(
    *,
    trajectory: Trajectory,
    reviewer,
    decision: str,
    expected_version: int,
    reason: str = "",
    messages: list | None = None,
) -> Review:
    """Record a human decision: a Review row, the new status and an audit event, in one transaction.

    Fix and accept stores the edited messages as a new revision and bumps the version. A decision
    based on a stale version raises VersionConflict and writes nothing.
    """
    if decision not in STATUS_FOR_DECISION:
        raise ReviewError(f"unknown decision {decision!r}")
    reason = (reason or "").strip()
    if decision == Decision.REJECT and not reason:
        raise ReviewError("A rejection needs a reason.")
    if decision == Decision.FIX_ACCEPT:
        problems = _messages_problems(messages)
        if problems:
            raise ReviewError("; ".join(problems))
    with transaction.atomic():
        locked = Trajectory.objects.select_for_update().get(pk=trajectory.pk)
        if locked.version != expected_version:
            raise VersionConflict(locked, expected_version)
        if _held_by_other(locked, reviewer):
            raise ReviewError(f"{locked.reserved_by} is reviewing this trajectory right now.")
        if decision == Decision.FIX_ACCEPT:
            if not revision_list(obj=locked).exists():
                # Keep the generated text as the first revision so the edit shows as a diff.
                revision_record(obj=locked, data=_trajectory_snapshot(locked), author=None, note="as generated")
            versioned_update(
                obj=locked,
                expected_version=expected_version,
                fields={
                    "messages": messages,
                    "content_hash": content_hash({"messages": messages, "tools": locked.tools}),
                },
            )
            revision_record(obj=locked, data=_trajectory_snapshot(locked), author=reviewer, note=reason or "fixed")
        review = Review.objects.create(
            trajectory=locked,
            reviewer=reviewer,
            decision=decision,
            reason=reason,
            trajectory_version=locked.version,
        )
        trajectory_status_set(trajectory=locked, status=STATUS_FOR_DECISION[decision], actor=reviewer, reason=reason)
        Trajectory.objects.filter(pk=locked.pk).update(reserved_by=None, reserved_until=None)
    trajectory.refresh_from_db()
    return review


@transaction.atomic
def reviews_bulk(*, trajectories, reviewer, decision: str, reason: str = "") -> int:
    """Accept or reject every trajectory of a queryset at its current version. Returns the count.

    Items another annotator holds a live reservation on are skipped.
    """
    if decision not in (Decision.ACCEPT, Decision.REJECT):
        raise ReviewError("Bulk actions can accept or reject, not edit.")
    reason = (reason or "").strip()
    if decision == Decision.REJECT and not reason:
        raise ReviewError("A rejection needs a reason.")
    now = timezone.now()
    free = Q(reserved_by__isnull=True) | Q(reserved_until__lt=now) | Q(reserved_by=reviewer)
    rows = list(
        Trajectory.objects.select_for_update()
        .filter(free, pk__in=trajectories.values("pk"))
        .values_list("pk", "version", "status")
    )
    if not rows:
        return 0
    status = STATUS_FOR_DECISION[decision]
    for _, _, previous in rows:
        status_transition_check(previous=previous, status=status)
    Review.objects.bulk_create(
        Review(trajectory_id=pk, reviewer=reviewer, decision=decision, reason=reason, trajectory_version=version)
        for pk, version, _ in rows
    )
    Trajectory.objects.filter(pk__in=[pk for pk, _, _ in rows]).update(
        status=status, reserved_by=None, reserved_until=None
    )
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor=reviewer,
            action="trajectory.status",
            target_type=Trajectory._meta.label_lower,
            target_id=str(pk),
            data={"from": previous, "to": status, "reason": reason, "bulk": True},
        )
        for pk, _, previous in rows
    )
    return len(rows)


@transaction.atomic
def trajectories_assign(*, trajectories, assignee, actor) -> int:
    """Assign (or, with assignee None, unassign) every trajectory of a queryset."""
    ids = list(trajectories.values_list("pk", flat=True))
    Trajectory.objects.filter(pk__in=ids).update(assigned_to=assignee)
    AuditEvent.objects.bulk_create(
        AuditEvent(
            actor=actor,
            action="trajectory.assign",
            target_type=Trajectory._meta.label_lower,
            target_id=str(pk),
            data={"assignee": getattr(assignee, "username", None)},
        )
        for pk in ids
    )
    return len(ids)
