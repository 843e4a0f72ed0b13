"""What the job kinds that store trajectories share: a unit's result for the trajectory it stored, and the job's
summary (trajectories per status, rejection reasons), shortfalls (trajectories left unjudged) and result panel."""

from django.db.models import Count

from simia_web.curation.models import JudgeVerdict, RuleViolation, Trajectory
from simia_web.curation.services import ERRORED_TERMINATIONS
from simia_web.formats.conversation import Violation
from simia_web.jobs.kinds import JobKind, Shortfalls


def trajectory_unit_result(trajectory: Trajectory, violations: list[Violation]) -> dict:
    """A unit's result for the trajectory it stored. One that an LLM or internal error cut short is stored, but it
    is not what the unit was for: its violation's detail is the unit's error (the unit ended in an error)."""
    result = {"trajectory": trajectory.pk, "status": trajectory.status}
    if trajectory.termination_reason in ERRORED_TERMINATIONS:
        reason = trajectory.termination_reason
        result["error"] = next((v.detail for v in violations if v.code == reason and v.detail), reason)
    return result


class TrajectoryJobKind(JobKind):
    result_template = "synthesis/_job_trajectories.html"

    def summary(self, job) -> dict:
        """Trajectories per status, and per rejection reason (most frequent first) the trajectories it rejects."""
        trajectories = Trajectory.objects.filter(job=job).values_list("status").annotate(n=Count("id")).order_by()
        reasons = dict(
            RuleViolation.objects.filter(trajectory__job=job, fixed=False)
            .values_list("code")
            .annotate(n=Count("trajectory", distinct=True))
            .order_by()
        )
        if judge_failed := Trajectory.objects.filter(job=job, judge_passed=False).count():
            reasons["judge_fail"] = judge_failed
        return {
            "trajectories": dict(trajectories),
            "rejection_reasons": dict(sorted(reasons.items(), key=lambda item: -item[1])),
        }

    def outcome(self, job) -> Shortfalls:
        """Trajectories left unjudged because the judge failed; the judge's failed calls count towards the cause."""
        verdicts = JudgeVerdict.objects.filter(trajectory__job=job).exclude(error="")
        unjudged = verdicts.filter(trajectory__judge_passed=None).values("trajectory").distinct().count()
        return Shortfalls(
            problems=(f"{unjudged} trajectories were left unjudged because the judge failed",) if unjudged else (),
            failures=verdicts.values_list("error", flat=True).iterator(),
        )
