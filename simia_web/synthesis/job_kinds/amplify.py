"""The amplify job kind (Simia-SFT): exactly `count` new trajectories, each written from a usable seed in one pass."""

from django import forms
from django.urls import reverse
from rest_framework import serializers

from simia_web.catalog.forms import WorkspaceDomainsForm
from simia_web.catalog.models import Domain, Seed
from simia_web.formats.rules import DEFAULT_MAX_MESSAGES, DEFAULT_MIN_MESSAGES
from simia_web.jobs.forms import JobParametersForm, Notice
from simia_web.jobs.kinds import UnitPlan, job_kind_register
from simia_web.jobs.parameters import CappedIntegerField, CappedListField
from simia_web.synthesis.amplify import STRATEGIES, amplify_unit_run, seed_order
from simia_web.synthesis.params import ROW_ID, JobParametersSerializer
from simia_web.synthesis.services import AMPLIFY, amplification_job_create
from simia_web.synthesis.trajectory_kinds import TrajectoryJobKind


class AmplifyJobSerializer(JobParametersSerializer):
    """`amplify`: new trajectories written from usable seeds (`manage.py queue amplify`)."""

    job_create = staticmethod(amplification_job_create)

    count = CappedIntegerField(cap="SIMIA_MAX_UNITS_PER_JOB", min_value=1, help_text="Trajectories to write.")
    domain = serializers.SlugField(
        required=False, allow_null=True, max_length=80, help_text="Only seeds of this domain (of the job's workspace)."
    )
    seed_ids = CappedListField(
        cap="SIMIA_MAX_UNITS_PER_JOB",
        child=serializers.IntegerField(**ROW_ID),
        required=False,
        allow_null=True,
        help_text="Only these seeds.",
    )
    strategy = serializers.ChoiceField(choices=STRATEGIES, default="round_robin")
    rng_seed = serializers.IntegerField(
        required=False, allow_null=True, min_value=0, max_value=2**63 - 1, help_text="Seed of the random choice."
    )
    min_messages = serializers.IntegerField(
        min_value=1, max_value=1000, default=DEFAULT_MIN_MESSAGES, help_text="Fewest messages an output may have."
    )
    max_messages = serializers.IntegerField(
        min_value=1, max_value=1000, default=DEFAULT_MAX_MESSAGES, help_text="Most messages an output may have."
    )

    def validate(self, data):
        if data["max_messages"] < data["min_messages"]:
            raise serializers.ValidationError({"max_messages": "must not be below min_messages"})
        return data


class AmplifyForm(WorkspaceDomainsForm, JobParametersForm):
    kind = AMPLIFY

    count = forms.IntegerField(initial=10, help_text="How many new trajectories to write.")
    domain = forms.ModelChoiceField(Domain.objects.all(), to_field_name="name", required=False, empty_label="All")
    seed_ids = forms.CharField(required=False, help_text="Seed ids, separated by commas (empty: every usable seed).")
    strategy = forms.ChoiceField(
        choices=[(s, s.replace("_", " ")) for s in STRATEGIES],
        help_text="How each new trajectory's seed is picked from the usable seeds.",
    )
    rng_seed = forms.IntegerField(required=False, help_text="Fix the random choices to repeat a run.")
    min_messages = forms.IntegerField()
    max_messages = forms.IntegerField()

    def clean_seed_ids(self) -> list[int]:
        raw = self.cleaned_data["seed_ids"].replace(",", " ").split()
        if not all(part.isdigit() for part in raw):
            raise forms.ValidationError("Seed ids are whole numbers.")
        return [int(part) for part in raw]

    def clean_domain(self) -> str | None:
        domain = self.cleaned_data["domain"]
        return domain.name if domain else None

    def prerequisites(self) -> list[Notice]:
        if Seed.objects.filter(domain__workspace_id=self.workspace_id, usable=True).exists():
            return []
        text = "No usable seed yet: amplification writes new trajectories from seed trajectories."
        return [Notice(text, reverse("seed-upload"), "Upload seeds")]


@job_kind_register
class AmplifyKind(TrajectoryJobKind):
    kind = AMPLIFY
    label = "Seed amplification"
    stages = ("amplify",)
    parameters = AmplifyJobSerializer
    form = AmplifyForm

    def plan(self, job, stage):
        if stage is not None:
            return None
        return "amplify", [
            UnitPlan("amplify", f"amplify:{i}", {"seed": seed_id, "index": i})
            for i, seed_id in enumerate(seed_order(job.params))
        ]

    def run(self, job, unit):
        return amplify_unit_run(job, unit)
