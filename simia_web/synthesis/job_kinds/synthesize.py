"""The synthesize job kind: domains → APIs and a world state → tasks → rollouts of each task."""

from django import forms
from rest_framework import serializers

from simia_web.catalog.forms import WorkspaceDomainsForm
from simia_web.catalog.models import Domain, Task, TaskStatus
from simia_web.catalog.services import apis_store, domain_name_taken, tasks_store
from simia_web.jobs.forms import JobParametersForm
from simia_web.jobs.kinds import UnitPlan, job_kind_register
from simia_web.jobs.parameters import CappedIntegerField, CappedListField, units_cap_refusal
from simia_web.llm.client import client_for_stage
from simia_web.llm.models import Stage
from simia_web.synthesis.generation import (
    API_PROMPT_VERSION,
    TASK_PROMPT_VERSION,
    apis_generate,
    domain_design,
    tasks_generate,
)
from simia_web.synthesis.params import RolloutLimitsSerializer
from simia_web.synthesis.rollout import (
    UnusableDomain,
    api_specs,
    domain_require_usable,
    rollout_unit_run,
    rollout_units,
)
from simia_web.synthesis.services import SYNTHESIZE, synthesis_job_create
from simia_web.synthesis.trajectory_kinds import TrajectoryJobKind


class SynthesizeJobSerializer(RolloutLimitsSerializer):
    """`synthesize`: domains → APIs → tasks → rollouts (`manage.py queue synthesize`)."""

    job_create = staticmethod(synthesis_job_create)

    domains = CappedListField(
        cap="SIMIA_MAX_DOMAINS_PER_JOB",
        child=serializers.SlugField(max_length=80),
        min_length=1,
        help_text="Domain names to synthesize (new ones are created in the job's workspace).",
    )
    apis = CappedIntegerField(cap="SIMIA_MAX_APIS_PER_DOMAIN", min_value=1, default=8, help_text="APIs per domain.")
    tasks = CappedIntegerField(cap="SIMIA_MAX_TASKS_PER_DOMAIN", min_value=1, default=10, help_text="Tasks per domain.")
    rollouts = CappedIntegerField(
        cap="SIMIA_MAX_ROLLOUTS_PER_TASK", min_value=1, default=1, help_text="Rollouts per task."
    )
    description = serializers.CharField(
        max_length=2000, allow_blank=True, default="", help_text="Description of new domains."
    )
    policy = serializers.CharField(
        max_length=100_000, allow_blank=True, default="", help_text="Agent policy (Markdown) of new domains."
    )

    def validate_domains(self, value: list[str]) -> list[str]:
        names = list(dict.fromkeys(value))  # a name given twice is one domain
        # Names are unique across workspaces: one another workspace's domain has cannot be made here.
        taken = Domain.objects.filter(name__in=names).exclude(workspace_id=self.workspace_id)
        if taken_names := sorted(taken.values_list("name", flat=True)):
            raise serializers.ValidationError([domain_name_taken(name) for name in taken_names])
        return names

    def validate(self, data):
        # Two synthesis units per domain, then a rollout unit per rollout of each task.
        if refusal := units_cap_refusal(len(data["domains"]) * (2 + data["tasks"] * data["rollouts"])):
            raise serializers.ValidationError({"units": refusal})
        return data


class SynthesisForm(WorkspaceDomainsForm, JobParametersForm):
    kind = SYNTHESIZE

    domains = forms.CharField(help_text="Domain names (slugs), separated by commas or spaces.")
    apis = forms.IntegerField()
    tasks = forms.IntegerField()
    rollouts = forms.IntegerField()
    max_steps = forms.IntegerField()
    max_errors = forms.IntegerField()
    user_turns = forms.IntegerField()
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 2}))
    policy = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 6}))

    def clean_domains(self) -> list[str]:
        return self.cleaned_data["domains"].replace(",", " ").split()


def _provenance(unit, client, reply, prompt_version: str) -> dict:
    return {
        "stage": unit.stage,
        "llm_calls": reply.call_ids,
        "model": client.profile.model,
        "profile": client.profile.name,
        "prompt_version": prompt_version,
    }


@job_kind_register
class SynthesizeKind(TrajectoryJobKind):
    kind = SYNTHESIZE
    label = "Synthesis (domains → APIs → tasks → rollouts)"
    stages = ("api_synthesis", "task_synthesis", "rollout")
    parameters = SynthesizeJobSerializer
    form = SynthesisForm
    queue_slug = "synthesis"

    def plan(self, job, stage):
        params = job.params
        if stage is None:
            return "api_synthesis", [
                UnitPlan("api_synthesis", f"apis:{name}", {"domain": name}) for name in params["domains"]
            ]
        if stage == "api_synthesis":
            return "task_synthesis", [
                UnitPlan("task_synthesis", f"tasks:{name}", {"domain": name}) for name in params["domains"]
            ]
        if stage == "task_synthesis":
            task_ids = list(Task.objects.filter(job=job, status=TaskStatus.VALID).values_list("id", flat=True))
            return "rollout", rollout_units(task_ids, params["rollouts"])
        return None

    def run(self, job, unit):
        if unit.stage == "rollout":
            return rollout_unit_run(job, unit)
        domain = Domain.objects.get(name=unit.params["domain"], workspace_id=job.workspace_id)
        profiles = job.params.get("profiles", {})
        if unit.stage == "api_synthesis":
            client = client_for_stage(Stage.API_SYNTHESIS, job_id=job.pk, profile_id=profiles.get(Stage.API_SYNTHESIS))
            reply = apis_generate(
                client=client,
                domain_name=domain.name,
                description=domain.description,
                policy=domain.policy,
                count=job.params["apis"],
            )

            design = domain_design(reply.data)

            def write_apis():
                stored = apis_store(
                    domain=domain,
                    apis=design["apis"],
                    state_schema=design["state_schema"],
                    initial_state=design["initial_state"],
                    job=job,
                    provenance=_provenance(unit, client, reply, API_PROMPT_VERSION),
                )
                return {"apis": len(stored), "valid": sum(a.valid for a in stored)}

            return write_apis
        client = client_for_stage(Stage.TASK_SYNTHESIS, job_id=job.pk, profile_id=profiles.get(Stage.TASK_SYNTHESIS))
        domain_require_usable(domain)
        apis = list(domain.apis.filter(valid=True))
        if not apis:
            raise UnusableDomain(f"domain {domain.name} has no valid APIs to write tasks for")
        reply = tasks_generate(
            client=client,
            domain_name=domain.name,
            policy=domain.policy,
            apis=[{"name": n, **s} for n, s in api_specs(apis).items()],
            state=domain.initial_state,
            count=job.params["tasks"],
        )

        def write_tasks():
            provenance = _provenance(unit, client, reply, TASK_PROMPT_VERSION)
            stored = tasks_store(domain=domain, tasks=reply.data["tasks"], job=job, provenance=provenance)
            return {"tasks": len(stored), "valid": sum(t.status == TaskStatus.VALID for t in stored)}

        return write_tasks
