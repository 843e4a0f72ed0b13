"""The `fidelity` job kind, whole: its parameters, its queue page's form, its stages and what each unit does.

Stage `replay`: one unit per trajectory, each replaying that trajectory's tool calls against the run's
reference in a fresh session. Stage `summary`: one unit that adds the run up per outcome and per API."""

from django import forms
from django.conf import settings
from rest_framework import serializers

from simia_web.accounts.models import default_workspace_id
from simia_web.catalog.forms import WorkspaceDomainsForm
from simia_web.catalog.models import Domain
from simia_web.jobs.forms import JobParametersForm
from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.parameters import CappedIntegerField

from .models import FidelityRun
from .selectors import replayable_trajectories
from .services import FIDELITY, fidelity_job_create, run_summarize, trajectory_measure

REPLAY, SUMMARY = "replay", "summary"


class FidelityJobSerializer(serializers.Serializer):
    """`fidelity`: the domain's trajectories replayed against its reference (`manage.py fidelity`, which can also
    name the reference, or `manage.py queue fidelity`)."""

    domain = serializers.SlugField(
        max_length=80, help_text="A domain of the job's workspace with a reference environment."
    )
    limit = CappedIntegerField(
        cap="SIMIA_MAX_UNITS_PER_JOB",
        min_value=1,
        required=False,
        allow_null=True,
        help_text="Only the first N trajectories with tool calls (default: every one, up to the units cap).",
    )

    def create(self, validated_data):
        # The workspace jobs.services.job_queue reads the parameters in (the `default` one when it names none).
        workspace = self.context.get("workspace")
        workspace_id = default_workspace_id() if workspace is None else workspace.pk
        return fidelity_job_create(**validated_data, workspace_id=workspace_id)


class FidelityForm(WorkspaceDomainsForm, JobParametersForm):
    kind = FIDELITY
    empty_choices = {
        "domain": (
            "No domain has a reference environment yet: fidelity replays a domain's trajectories against the real "
            "implementation of its APIs (an MCP server). Open a domain and set one under Reference environment.",
            "domain-list",
            "Choose a domain",
        )
    }

    domain = forms.ModelChoiceField(
        Domain.objects.filter(reference__isnull=False).only("id", "name"), to_field_name="name"
    )
    limit = forms.IntegerField(required=False, help_text="Empty: every trajectory with tool calls.")

    def clean_domain(self) -> str:
        return self.cleaned_data["domain"].name


@job_kind_register
class FidelityKind(JobKind):
    kind = FIDELITY
    label = "Fidelity against the reference"
    stages = (REPLAY, SUMMARY)
    parameters = FidelityJobSerializer
    form = FidelityForm
    result_template = "fidelity/_job_run.html"

    def plan(self, job, stage):
        run = FidelityRun.objects.select_related("domain").get(pk=job.params["run"])
        if stage is None:
            replayable = replayable_trajectories(run.domain).values_list("id", flat=True)
            ids = list(replayable[: job.params.get("limit") or settings.SIMIA_MAX_UNITS_PER_JOB])
            return REPLAY, [UnitPlan(REPLAY, f"trajectory:{pk}", {"trajectory": pk}) for pk in ids]
        if stage == REPLAY:
            return SUMMARY, [UnitPlan(SUMMARY, f"summary:{run.pk}", {})]
        return None

    def run(self, job, unit):
        run = FidelityRun.objects.select_related("domain").get(pk=job.params["run"])
        if unit.stage == REPLAY:
            return trajectory_measure(run=run, trajectory_id=unit.params["trajectory"])
        return lambda: {"fidelity": run_summarize(run=run)["fidelity"]}

    def summary(self, job) -> dict:
        """The run the job measures (its page has the figures), and its fidelity once added up."""
        run = FidelityRun.objects.filter(job=job).only("summary").first()
        if run is None:
            return {}
        return {"fidelity_run": run.pk, "fidelity": (run.summary or {}).get("fidelity")}
