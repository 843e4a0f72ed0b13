"""The rollout job kind: more rollouts on a domain's valid tasks."""

from django import forms
from django.urls import reverse
from rest_framework import serializers

from simia_web.catalog.forms import WorkspaceDomainsForm
from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.jobs.forms import JobParametersForm, Notice
from simia_web.jobs.kinds import job_kind_register
from simia_web.jobs.parameters import CappedIntegerField, units_cap_refusal
from simia_web.synthesis.params import RolloutLimitsSerializer
from simia_web.synthesis.rollout import rollout_unit_run, rollout_units
from simia_web.synthesis.selectors import valid_task_count, valid_tasks_of
from simia_web.synthesis.services import ENVIRONMENTS, REFERENCE, ROLLOUT, SIMULATOR, rollout_job_create
from simia_web.synthesis.trajectory_kinds import TrajectoryJobKind


class RolloutJobSerializer(RolloutLimitsSerializer):
    """`rollout`: more rollouts on a domain's valid tasks (`manage.py queue rollout`)."""

    job_create = staticmethod(rollout_job_create)

    domain = serializers.SlugField(max_length=80, help_text="An existing domain of the job's workspace.")
    # Tasks already made, however many: the product with the rollouts is what is capped.
    tasks = CappedIntegerField(
        cap="SIMIA_MAX_UNITS_PER_JOB",
        min_value=1,
        required=False,
        allow_null=True,
        help_text="Only the first N valid tasks (default: all).",
    )
    rollouts = CappedIntegerField(
        cap="SIMIA_MAX_ROLLOUTS_PER_TASK", min_value=1, default=1, help_text="Rollouts per task."
    )
    environment = serializers.ChoiceField(
        choices=ENVIRONMENTS,
        default=SIMULATOR,
        help_text="What answers the tool calls: the LLM simulator, or the domain's reference environment.",
    )

    def validate(self, data):
        available = valid_task_count(domain_name=data["domain"], workspace_id=self.workspace_id)
        if refusal := units_cap_refusal(min(data.get("tasks") or available, available) * data["rollouts"]):
            raise serializers.ValidationError({"units": refusal})
        return data


class RolloutForm(WorkspaceDomainsForm, JobParametersForm):
    kind = ROLLOUT

    domain = forms.ModelChoiceField(Domain.objects.all(), to_field_name="name")
    rollouts = forms.IntegerField()
    tasks = forms.IntegerField(required=False, help_text="Empty: every valid task.")
    max_steps = forms.IntegerField()
    max_errors = forms.IntegerField()
    user_turns = forms.IntegerField()
    environment = forms.ChoiceField(
        choices=[(SIMULATOR, "the simulator"), (REFERENCE, "the domain's reference environment (real responses)")],
        required=False,
        help_text="What answers the agent's tool calls.",
    )

    def clean_domain(self) -> str:
        return self.cleaned_data["domain"].name

    def prerequisites(self) -> list[Notice]:
        tasks = Task.objects.filter(domain__workspace_id=self.workspace_id, status=TaskStatus.VALID)
        if not self.workspace_domains.exists() or tasks.exists():
            return []
        text = "No domain has a valid task yet: rollouts run a domain's tasks. Write one, or queue a synthesis job."
        return [Notice(text, reverse("task-new"), "Write a task")]


@job_kind_register
class RolloutKind(TrajectoryJobKind):
    kind = ROLLOUT
    label = "Rollouts on existing tasks"
    stages = ("rollout",)
    parameters = RolloutJobSerializer
    form = RolloutForm
    queue_slug = "rollouts"

    def plan(self, job, stage):
        if stage is not None:
            return None
        tasks = valid_tasks_of(domain_name=job.params["domain"], workspace_id=job.workspace_id)
        if job.params.get("tasks"):
            tasks = tasks[: job.params["tasks"]]
        return "rollout", rollout_units(list(tasks.values_list("id", flat=True)), job.params["rollouts"])

    def run(self, job, unit):
        return rollout_unit_run(job, unit)
