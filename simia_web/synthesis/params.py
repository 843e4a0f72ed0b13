"""What the parameters of the synthesis job kinds share (each kind's serializer is in its module of job_kinds):
the workspace the job works in, endpoint profiles per stage, the judge's configuration, and a rollout's limits."""

from collections.abc import Callable, Mapping
from functools import cached_property
from typing import Any

from rest_framework import serializers

from simia_web.accounts.models import default_workspace_id
from simia_web.calibration.selectors import best_calibrated
from simia_web.jobs.models import Job
from simia_web.jobs.parameters import DescribedChoiceField
from simia_web.llm.models import EndpointProfile, Stage

ROW_ID: dict[str, Any] = {"min_value": 1, "max_value": 2**63 - 1}
ROUTE, BEST_CALIBRATED = "route", "best_calibrated"


def judge_configurations_described() -> dict[str, str]:
    """What each judge configuration means now: the best-calibrated one names its run and how well it agreed."""
    run = best_calibrated()
    if run is None:
        best = "no calibration run has finished yet"
    else:
        kappa = ((run.summary.get("figures") or {}).get("passed") or {}).get("kappa")
        agreed = "kappa undefined" if kappa is None else f"kappa {kappa:.2f}"
        best = f"{run.prompt_version} × {run.profile_name}, {agreed}, run {run.pk}"
    return {
        ROUTE: "The configured judge (the judge stage's route, or profiles.judge)",
        BEST_CALIBRATED: f"The best-calibrated prompt and endpoint ({best})",
    }


def context_workspace_id(context: Mapping[str, Any]) -> int:
    """The workspace a job's parameters are read in: the one `jobs.services.job_queue` puts in the serializer's
    context (`workspace`), the `default` one when it names none."""
    workspace = context.get("workspace")
    return default_workspace_id() if workspace is None else workspace.pk


class JobParametersSerializer(serializers.Serializer):
    """Endpoint profiles per stage, which every kind takes; save(actor=...) writes the job with `job_create`, in
    the workspace of the serializer's context (`workspace_id`)."""

    job_create: Callable[..., Job]  # staticmethod(<the kind's job_create service>)

    @cached_property
    def workspace_id(self) -> int:
        """The workspace the job works in: the domains it names are looked up there, and what it makes is its."""
        return context_workspace_id(self.context)

    profiles = serializers.DictField(
        child=serializers.IntegerField(**ROW_ID),
        required=False,
        help_text='An endpoint profile id per stage, instead of the stage\'s route: {"judge": 3}.',
    )

    def validate_profiles(self, value: dict) -> dict:
        unknown = sorted(set(value) - set(Stage.values))
        if unknown:
            raise serializers.ValidationError(f"no stage named {', '.join(unknown)}; stages: {', '.join(Stage.values)}")
        # Checked now: a job naming a profile that is not there would fail every one of its units.
        existing = set(EndpointProfile.objects.filter(pk__in=value.values()).values_list("pk", flat=True))
        missing = {stage: [f"no endpoint profile with id {pk}"] for stage, pk in value.items() if pk not in existing}
        if missing:
            raise serializers.ValidationError(missing)
        return value

    judge_configuration = DescribedChoiceField(
        choices=[(ROUTE, "The judge's route (or profiles.judge)"), (BEST_CALIBRATED, "The best-calibrated one")],
        describe=judge_configurations_described,
        default=ROUTE,
        label="Judge",
        help_text="The best-calibrated configuration (best_calibrated) is the prompt version and endpoint profile "
        "whose latest calibration run agreed most with people's ratings (Cohen's kappa of the verdict; see "
        "/calibration/), fixed when the job is queued.",
    )

    def validate_judge_configuration(self, value: str) -> str:
        if value == BEST_CALIBRATED and best_calibrated() is None:
            raise serializers.ValidationError("no calibration run has finished: run one on /calibration/ first")
        return value

    def create(self, validated_data):
        if validated_data.pop("judge_configuration", ROUTE) == BEST_CALIBRATED:
            run = best_calibrated()
            if run is None:  # the runs were deleted since the check
                raise serializers.ValidationError({"judge_configuration": "no calibration run has finished"})
            validated_data["profiles"] = {**validated_data.get("profiles", {}), Stage.JUDGE: run.profile_id}
            validated_data["judge_prompt"] = run.prompt_version
        return type(self).job_create(**validated_data, workspace_id=self.workspace_id)


class RolloutLimitsSerializer(JobParametersSerializer):
    max_steps = serializers.IntegerField(min_value=1, max_value=100, default=12, help_text="Agent steps per rollout.")
    max_errors = serializers.IntegerField(
        min_value=1, max_value=50, default=3, help_text="Tool errors before a rollout stops."
    )
    user_turns = serializers.IntegerField(
        min_value=0, max_value=20, default=0, help_text="Extra turns by the simulated user."
    )
