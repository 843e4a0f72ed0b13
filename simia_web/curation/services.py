"""Writes to trajectories: creation by the pipelines, verdicts, status changes and human reviews."""

from dataclasses import dataclass
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef, Q
from django.utils import timezone

from simia_web.core.jsonutil import content_hash
from simia_web.core.models import AuditEvent
from simia_web.core.selectors import revision_list
from simia_web.core.services import VersionConflict, audit_record, revision_record, versioned_update
from simia_web.jobs.models import Job
from simia_web.jobs.services import job_create

from .models import Decision, JudgeVerdict, Review, RuleViolation, Trajectory, TrajectoryStatus
from .selectors import queue_after


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
    fields.update(
        conversation_summary(
            messages=fields.get("messages", []), termination_reason=fields.get("termination_reason", "")
        )
    )
    fields.setdefault("model", str((fields.get("provenance") or {}).get("model", ""))[:120])
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


# Rollouts that ended on an error hold no conversation worth a person's time.
ERRORED_TERMINATIONS = frozenset({"llm_error", "internal_error"})
PREVIEW_CHARS = 200


def conversation_summary(*, messages: list, termination_reason: str = "") -> dict:
    """The queue row's columns derived from the messages: preview, turns, tool calls, and whether it is reviewable."""
    messages = [m for m in messages or [] if isinstance(m, dict)]
    first_user = next((m.get("content") for m in messages if m.get("role") == "user"), "")
    answered = any(m.get("role") == "assistant" and (m.get("content") or m.get("tool_calls")) for m in messages)
    return {
        "preview": " ".join(str(first_user or "").split())[:PREVIEW_CHARS],
        "turns": sum(1 for m in messages if m.get("role") in ("user", "assistant")),
        "tool_call_count": sum(len(m.get("tool_calls") or []) for m in messages),
        "reviewable": answered and termination_reason not in ERRORED_TERMINATIONS,
    }


def _verdict_headline(verdict: dict | None) -> dict:
    """The verdict numbers the review queue filters and orders on, copied onto the trajectory."""
    if verdict is None:
        return {}
    return {
        "judge_passed": verdict.get("passed"),
        "judge_score": verdict.get("score"),
        "judge_confidence": verdict.get("confidence"),
    }


def verdict_record(*, trajectory_id: int, version: int, verdict: dict) -> JudgeVerdict:
    """Store a judge verdict on `version` of a trajectory (Judge again). It becomes the headline (queue filters,
    agreement) only while that version is current, and moves a pipeline status; a person's decision stays."""
    with transaction.atomic():
        trajectory = Trajectory.objects.select_for_update().get(pk=trajectory_id)
        record = JudgeVerdict.objects.create(trajectory=trajectory, trajectory_version=version, **verdict)
        if trajectory.version == version:
            fields = _verdict_headline(verdict)
            if trajectory.status not in HUMAN_STATUSES:
                violations = list(trajectory.violations.filter(fixed=False))
                fields["status"] = trajectory_status_for(violations=violations, verdict=verdict)
            Trajectory.objects.filter(pk=trajectory.pk).update(**fields)
    return record


# The job kind of curation.judging (registered when the app is ready).
JUDGE_JOB_KIND = "judge"


def trajectory_judge_again(*, trajectory: Trajectory, actor) -> Job:
    """Queue a judge job for the trajectory's current version."""
    return job_create(kind=JUDGE_JOB_KIND, params={"versions": {str(trajectory.pk): trajectory.version}}, actor=actor)


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


def _reservation_until():
    return timezone.now() + timedelta(seconds=settings.SIMIA_RESERVATION_SECONDS)


def _free_for(user) -> Q:
    return Q(reserved_by__isnull=True) | Q(reserved_until__lt=timezone.now()) | Q(reserved_by=user)


def trajectory_reserve(*, trajectory: Trajectory, user) -> bool:
    """Hold (or keep holding) the trajectory for `user` for SIMIA_RESERVATION_SECONDS unless someone else does.

    Returns True when `user` now holds it. A single conditional UPDATE, so two annotators cannot both win;
    the open review page calls it again before the time runs out.
    """
    until = _reservation_until()
    won = Trajectory.objects.filter(_free_for(user), pk=trajectory.pk).update(reserved_by=user, reserved_until=until)
    if won:
        trajectory.reserved_by, trajectory.reserved_until = user, until
    else:
        trajectory.refresh_from_db(fields=["reserved_by", "reserved_until"])
    return bool(won)


def trajectory_release(*, trajectory_id: int, user) -> bool:
    """Give up `user`'s hold on a trajectory (the Release button, or the page being left)."""
    return bool(
        Trajectory.objects.filter(pk=trajectory_id, reserved_by=user).update(reserved_by=None, reserved_until=None)
    )


def trajectory_claim_next(*, queue, user, after_id: int | None = None, sort: str | None = None) -> Trajectory | None:
    """The review stream: release what `user` holds and claim the first free item of `queue` (after `after_id`).

    `queue` is an ordered queryset (selectors.review_queue). Another annotator may claim the same row between
    the read and the conditional UPDATE; then the next free one is tried.
    """
    Trajectory.objects.filter(reserved_by=user).update(reserved_by=None, reserved_until=None)
    candidates = queue.filter(_free_for(user), reviewable=True)
    if after_id is not None:
        candidates = queue_after(candidates, after_id, sort)
    for _ in range(20):
        candidate = candidates.only("pk").first()
        if candidate is None:
            return None
        if trajectory_reserve(trajectory=candidate, user=user):
            return candidate
    return None


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


NOT_REVIEWABLE = "This trajectory has no assistant answer (empty or ended on an error); it can only be rejected."


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
        summary = None
        if decision == Decision.FIX_ACCEPT:
            summary = conversation_summary(messages=messages, termination_reason=locked.termination_reason)
        if decision == Decision.ACCEPT and not locked.reviewable or summary and not summary["reviewable"]:
            raise ReviewError(NOT_REVIEWABLE)
        previous_status = locked.status
        if decision == Decision.FIX_ACCEPT:
            _messages_replace(
                trajectory=locked,
                messages=messages,
                expected_version=expected_version,
                author=reviewer,
                note=reason or "fixed",
            )
        review = Review.objects.create(
            trajectory=locked,
            reviewer=reviewer,
            decision=decision,
            reason=reason,
            trajectory_version=locked.version,
            previous_status=previous_status,
        )
        trajectory_status_set(trajectory=locked, status=STATUS_FOR_DECISION[decision], actor=reviewer, reason=reason)
        Trajectory.objects.filter(pk=locked.pk).update(reserved_by=None, reserved_until=None)
    trajectory.refresh_from_db()
    return review


def _messages_replace(*, trajectory: Trajectory, messages: list, expected_version: int, author, note: str) -> None:
    """Write new messages as the next version and revision (the generated text is kept as revision 1)."""
    if not revision_list(obj=trajectory).exists():
        # Keep the generated text as the first revision so the edit shows as a diff.
        revision_record(obj=trajectory, data=_trajectory_snapshot(trajectory), author=None, note="as generated")
    versioned_update(
        obj=trajectory,
        expected_version=expected_version,
        fields={
            "messages": messages,
            "content_hash": content_hash({"messages": messages, "tools": trajectory.tools}),
            **conversation_summary(messages=messages, termination_reason=trajectory.termination_reason),
        },
    )
    revision_record(obj=trajectory, data=_trajectory_snapshot(trajectory), author=author, note=note)


def trajectory_revert(*, trajectory: Trajectory, to_version: int, expected_version: int, actor) -> Trajectory:
    """Make an earlier revision's messages the current text again, as a new version (history is kept)."""
    with transaction.atomic():
        locked = Trajectory.objects.select_for_update().get(pk=trajectory.pk)
        if locked.version != expected_version:
            raise VersionConflict(locked, expected_version)
        revision = revision_list(obj=locked).filter(version=to_version).first()
        if revision is None or to_version == locked.version:
            raise ReviewError(f"There is no earlier version {to_version} to go back to.")
        _messages_replace(
            trajectory=locked,
            messages=revision.data["messages"],
            expected_version=expected_version,
            author=actor,
            note=f"reverted to v{to_version}",
        )
        audit_record(actor=actor, action="trajectory.revert", target=locked, data={"to_version": to_version})
    trajectory.refresh_from_db()
    return trajectory


def review_undo(*, review: Review, actor) -> Trajectory:
    """Take back a decision: the status before it returns, and a fix's edit is reverted as a new version.

    Only the latest decision on a trajectory can be undone, by the person who made it or a curator, and only
    while nothing has changed the trajectory since; the Review row stays, marked undone.
    """
    if review.reviewer_id != actor.pk and not actor.has_role("curator"):
        raise ReviewError("Only the reviewer or a curator can undo this decision.")
    with transaction.atomic():
        locked = Trajectory.objects.select_for_update().get(pk=review.trajectory_id)
        latest = Review.objects.filter(trajectory=locked, undone_at__isnull=True).order_by("-id").first()
        if latest is None or latest.pk != review.pk:
            raise ReviewError("Only the latest decision on a trajectory can be undone.")
        if locked.version != review.trajectory_version:
            raise ReviewError(f"The trajectory changed after this decision (it is now version {locked.version}).")
        if review.decision == Decision.FIX_ACCEPT and review.trajectory_version > 1:
            _messages_replace(
                trajectory=locked,
                messages=revision_list(obj=locked).get(version=review.trajectory_version - 1).data["messages"],
                expected_version=locked.version,
                author=actor,
                note=f"undo of the fix in v{review.trajectory_version}",
            )
        previous = locked.status
        restored = review.previous_status or TrajectoryStatus.GENERATED
        Trajectory.objects.filter(pk=locked.pk).update(status=restored)
        Review.objects.filter(pk=review.pk).update(undone_at=timezone.now(), undone_by=actor)
        audit_record(
            actor=actor,
            action="trajectory.undo",
            target=locked,
            data={"from": previous, "to": restored, "review": review.pk},
        )
    locked.refresh_from_db()
    return locked


@dataclass
class BulkOutcome:
    changed: int
    held: int  # reserved by someone else right now
    decided: int  # already carry an individual person's decision, left as they are
    unreviewable: int  # empty or errored, which cannot be accepted


def bulk_preview(*, trajectories, reviewer, decision: str) -> BulkOutcome:
    """What reviews_bulk would do to these trajectories, for the confirmation that names the counts."""
    return _bulk_split(trajectories, reviewer, decision, lock=False)[0]


def _bulk_split(trajectories, reviewer, decision, *, lock: bool):
    now = timezone.now()
    qs = Trajectory.objects.filter(pk__in=trajectories.values("pk"))
    if lock:
        qs = qs.select_for_update()
    individual = Review.objects.filter(trajectory=OuterRef("pk"), bulk=False, undone_at__isnull=True)
    rows = qs.annotate(
        held=~(Q(reserved_by__isnull=True) | Q(reserved_until__lt=now) | Q(reserved_by=reviewer)),
        decided=Exists(individual) & Q(status__in=HUMAN_STATUSES),
    ).values_list("pk", "version", "status", "reviewable", "held", "decided")
    outcome, ready = BulkOutcome(0, 0, 0, 0), []
    for pk, version, status, reviewable, held, decided in rows:
        if held:
            outcome.held += 1
        elif decided:
            outcome.decided += 1
        elif decision == Decision.ACCEPT and not reviewable:
            outcome.unreviewable += 1
        else:
            ready.append((pk, version, status))
    outcome.changed = len(ready)
    return outcome, ready


@transaction.atomic
def reviews_bulk(*, trajectories, reviewer, decision: str, reason: str = "") -> BulkOutcome:
    """Accept or reject every trajectory of a queryset at its current version.

    Never touches items another annotator holds, items a person already decided individually, or (when
    accepting) empty and errored ones; the outcome counts each group so the page can say so.
    """
    if decision not in (Decision.ACCEPT, Decision.REJECT):
        raise ReviewError("Bulk actions can accept or reject, not edit.")
    reason = (reason or "").strip()
    if decision == Decision.REJECT and not reason:
        raise ReviewError("A rejection needs a reason.")
    outcome, rows = _bulk_split(trajectories, reviewer, decision, lock=True)
    if not rows:
        return outcome
    status = STATUS_FOR_DECISION[decision]
    for _, _, previous in rows:
        status_transition_check(previous=previous, status=status)
    Review.objects.bulk_create(
        Review(
            trajectory_id=pk,
            reviewer=reviewer,
            decision=decision,
            reason=reason,
            trajectory_version=version,
            bulk=True,
            previous_status=previous,
        )
        for pk, version, previous in rows
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
    return outcome


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
