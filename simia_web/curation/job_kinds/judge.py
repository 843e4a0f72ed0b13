"""The "judge" job kind: the LLM judge scores the current version of trajectories again ("Judge again").

Each unit loads one trajectory, calls the judge outside any transaction, and its writer stores the verdict
for the version it judged; the verdict becomes the trajectory's headline only if that version is still current.
A judge call that failed is stored as a verdict with its error, and its unit's result names the error (see
JobKind.run), so the job's outcome and progress show it.
"""

from simia_web.curation.models import Trajectory
from simia_web.curation.selectors.trajectory import task_text
from simia_web.curation.services import JUDGE_JOB_KIND, verdict_record
from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import Stage
from simia_web.simulation.judge import judge_run, world_evidence


@job_kind_register
class JudgeKind(JobKind):
    kind = JUDGE_JOB_KIND
    label = "Judge again"
    stages = ("judge",)
    parameters = None  # queued from a trajectory page with its version (curation.services)

    def plan(self, job, stage):
        if stage is not None:
            return None
        return "judge", [
            UnitPlan("judge", f"judge:{pk}:v{version}", {"trajectory": int(pk), "version": version})
            for pk, version in job.params["versions"].items()
        ]

    def run(self, job, unit):
        trajectory = Trajectory.objects.select_related("domain", "task").get(pk=unit.params["trajectory"])
        version = trajectory.version
        verdict = judge_run(
            client=client_for_stage(Stage.JUDGE, job_id=job.pk, profile_id=job.params.get("profile")),
            messages=trajectory.messages,
            tools=trajectory.tools,
            task=task_text(trajectory),
            policy=trajectory.domain.policy,
            world=world_evidence(trajectory.initial_state or {}, trajectory.steps or {}),
        )

        def write():
            record = verdict_record(trajectory_id=trajectory.pk, version=version, verdict=verdict)
            result = {"trajectory": trajectory.pk, "verdict": record.pk, "version": version}
            # A failed call is stored beside the verdicts, and the unit counts as ended in an error, not done:
            # the job fails or finishes with errors instead of claiming a verdict it did not get.
            return {**result, "error": verdict["error"]} if verdict.get("error") else result

        return write
