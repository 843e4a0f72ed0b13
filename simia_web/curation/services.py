"""Writes to trajectories: creation by the pipelines, verdicts, and status changes."""

from django.db import transaction

from simia_web.core.jsonutil import content_hash
from simia_web.core.services import audit_record

from .models import JudgeVerdict, RuleViolation, Trajectory, TrajectoryStatus


def trajectory_status_for(*, violations: list, verdict: dict | None) -> str:
    """Rules first: any unfixed violation fails; then the judge decides; no verdict means generated."""
    if any(not v.fixed for v in violations):
        return TrajectoryStatus.RULES_FAILED
    if verdict is None or verdict.get("passed") is None:
        return TrajectoryStatus.GENERATED
    return TrajectoryStatus.JUDGED_PASS if verdict["passed"] else TrajectoryStatus.JUDGED_FAIL


@transaction.atomic
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
        **fields,
    )
    RuleViolation.objects.bulk_create(
        RuleViolation(
            trajectory=trajectory, code=v.code, message_index=v.message_index, detail=v.detail[:2000], fixed=v.fixed
        )
        for v in violations
    )
    if verdict is not None:
        verdict_record(trajectory=trajectory, verdict=verdict)
    return trajectory


def verdict_record(*, trajectory: Trajectory, verdict: dict) -> JudgeVerdict:
    """Store a judge verdict and copy its headline numbers onto the trajectory for the review queue."""
    row = JudgeVerdict.objects.create(trajectory=trajectory, **verdict)
    Trajectory.objects.filter(pk=trajectory.pk).update(
        judge_passed=row.passed, judge_score=row.score, judge_confidence=row.confidence
    )
    trajectory.judge_passed, trajectory.judge_score, trajectory.judge_confidence = row.passed, row.score, row.confidence
    return row


def trajectory_status_set(*, trajectory: Trajectory, status: str, actor=None, reason: str = "") -> Trajectory:
    """Change a status with an audit event in the same transaction."""
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
