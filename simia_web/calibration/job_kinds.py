"""The `calibrate` job kind, whole: a judge configuration (prompt version x endpoint profile) run over the items
people have rated.

The job works in its workspace: it judges that workspace's rated items, and its run is that workspace's.

Stage `judge`: one unit per rated item; each calls the judge on the item's current text outside any transaction
and stores its answer on the run only, never as the trajectory's verdict. An answer the judge could not give (an
unparseable or invalid reply, an endpoint error) is stored with its reason and ends the unit in an error, not the
job. Stage `summary`: one unit that computes the run's figures against the people's ratings."""

from django import forms
from django.conf import settings
from django.urls import reverse
from rest_framework import serializers

from simia_web.accounts.models import default_workspace_id
from simia_web.curation.models import Trajectory
from simia_web.curation.selectors.trajectory import task_text
from simia_web.jobs.forms import JobParametersForm, Notice
from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import EndpointProfile, Stage
from simia_web.simulation.judge import PROMPT_VERSION, PROMPTS, judge_run, world_evidence

from .models import CalibrationRun
from .selectors import current_ratings, rated_items
from .services import CALIBRATE, answer_record, calibration_job_create, run_summarize

JUDGE, SUMMARY = "judge", "summary"
PROMPT_CHOICES = [(version, version) for version in PROMPTS]


class CalibrationJobSerializer(serializers.Serializer):
    """`calibrate`: the judge, in one configuration, over every item with a rating of its current text."""

    prompt_version = serializers.ChoiceField(choices=PROMPT_CHOICES, default=PROMPT_VERSION)
    profile = serializers.IntegerField(
        min_value=1, required=False, allow_null=True, help_text="An endpoint profile id (default: the judge's route)."
    )

    def create(self, validated_data):
        # The workspace the job is queued in (jobs.services.job_queue puts it in the context).
        return calibration_job_create(**validated_data, workspace=self.context.get("workspace"))


class CalibrationForm(JobParametersForm):
    kind = CALIBRATE

    prompt_version = forms.ChoiceField(
        choices=PROMPT_CHOICES, initial=PROMPT_VERSION, help_text="The judge's prompt to measure against the ratings."
    )
    profile = forms.ModelChoiceField(
        EndpointProfile.objects.order_by("name").only("id", "name"),
        required=False,
        empty_label="The judge's route",
        help_text="The endpoint the judge runs on (empty: the judge stage's route on the LLM endpoints page).",
    )

    def clean_profile(self) -> int | None:
        profile = self.cleaned_data["profile"]
        return profile.pk if profile else None

    def prerequisites(self) -> list[Notice]:
        # The workspace the page queues in, when it names one (else the `default` one, as job_queue does).
        workspace = getattr(self, "workspace", None)
        workspace_ids = [workspace.pk if workspace is not None else default_workspace_id()]
        if current_ratings(workspace_ids=workspace_ids).exists():
            return []
        return [
            Notice(
                "Nobody has rated an item yet: the judge is calibrated against people's ratings, so there is nothing "
                "to run it on. Hand items out to rate, or rate items from their review pages, then come back.",
                reverse("calibration-assignments"),
                "Hand out items to rate",
            )
        ]


@job_kind_register
class CalibrationKind(JobKind):
    kind = CALIBRATE
    label = "Calibrate the judge on human ratings"
    stages = (JUDGE, SUMMARY)
    parameters = CalibrationJobSerializer
    form = CalibrationForm
    result_template = "calibration/_job_run.html"

    def plan(self, job, stage):
        if stage is None:
            rated = rated_items(workspace_ids=[job.workspace_id])
            ids = list(rated.values_list("id", flat=True)[: settings.SIMIA_MAX_UNITS_PER_JOB])
            return JUDGE, [UnitPlan(JUDGE, f"item:{pk}", {"trajectory": pk}) for pk in ids]
        if stage == JUDGE:
            return SUMMARY, [UnitPlan(SUMMARY, f"summary:{job.params['run']}", {})]
        return None

    def run(self, job, unit):
        run = CalibrationRun.objects.get(pk=job.params["run"])
        if unit.stage == SUMMARY:
            return lambda: {"items": run_summarize(run=run)["items"]}
        trajectory = Trajectory.objects.select_related("domain", "task").get(pk=unit.params["trajectory"])
        version = trajectory.text_version
        verdict = judge_run(
            client=client_for_stage(Stage.JUDGE, job_id=job.pk, profile_id=job.params["profile"]),
            messages=trajectory.messages,
            tools=trajectory.tools,
            task=task_text(trajectory),
            policy=trajectory.domain.policy,
            world=world_evidence(trajectory.initial_state or {}, trajectory.steps or {}),
            prompt_version=job.params["prompt_version"],
        )

        def write():
            answer = answer_record(run=run, trajectory_id=trajectory.pk, version=version, verdict=verdict)
            result = {"trajectory": trajectory.pk, "answer": answer.pk}
            return {**result, "error": answer.error} if answer.error else result

        return write

    def summary(self, job) -> dict:
        run = CalibrationRun.objects.filter(job=job).only("id", "summary").first()
        if run is None:
            return {}
        overall = ((run.summary or {}).get("figures") or {}).get("passed") or {}
        return {"calibration_run": run.pk, "accuracy": overall.get("accuracy"), "kappa": overall.get("kappa")}
