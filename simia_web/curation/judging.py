"""The "judge" job kind: the LLM judge scores the current version of trajectories again ("Judge again").

Each unit loads one trajectory, calls the judge outside any transaction, and its writer stores the verdict
for the version it judged; the verdict becomes the trajectory's headline only if that version is still current.
"""

from simia_web.formats.conversation import message_text
from simia_web.jobs.pipelines import UnitPlan, pipeline_register
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import Stage
from simia_web.synthesis.judge import judge_run, world_evidence

from .models import Trajectory
from .services import JUDGE_JOB_KIND, verdict_record


def _task_text(trajectory: Trajectory) -> str:
    if trajectory.task_id:
        return f"{trajectory.task.instruction}\nExpected outcome: {trajectory.task.expected_outcome}"
    first = next((message_text(m) for m in trajectory.messages if m.get("role") == "user"), "")
    return "Serve the user's requests in this conversation. The first was: " + first


class JudgePipeline:
    kind = JUDGE_JOB_KIND
    label = "Judge again"
    stages = ("judge",)
    parameters = None  # queued from a trajectory page with its version (curation.services)
    form = None

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
            task=_task_text(trajectory),
            policy=trajectory.domain.policy,
            world=world_evidence(trajectory.initial_state or {}, trajectory.steps or {}),
        )

        def write():
            record = verdict_record(trajectory_id=trajectory.pk, version=version, verdict=verdict)
            return {"trajectory": trajectory.pk, "verdict": record.pk, "version": version}

        return write


pipeline_register(JudgePipeline())
