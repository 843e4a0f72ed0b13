"""The parameters of the synthesize, rollout and amplify job kinds: one serializer each, holding the ranges and
caps (used by the commands, the queue pages and the REST API through jobs.services.job_queue), and the form of
each queue page, which only parses what the page sends."""

from django import forms
from rest_framework import serializers

from simia_web.catalog.models import Domain
from simia_web.formats.rules import DEFAULT_MAX_MESSAGES, DEFAULT_MIN_MESSAGES
from simia_web.jobs.forms import JobParametersForm
from simia_web.jobs.parameters import CappedIntegerField, CappedListField, units_cap_check
from simia_web.llm.models import EndpointProfile, Stage

from .amplify import STRATEGIES
from .selectors import valid_task_count
from .services import (
    AMPLIFY,
    ENVIRONMENTS,
    REFERENCE,
    ROLLOUT,
    SIMULATOR,
    SYNTHESIZE,
    amplification_job_create,
    rollout_job_create,
    synthesis_job_create,
)

ROW_ID = {"min_value": 1, "max_value": 2**63 - 1}


class _JobParametersSerializer(serializers.Serializer):
    """Endpoint profiles per stage, which every kind takes; save(actor=...) writes the job with `job_create`."""

    profiles = serializers.DictField(
        child=serializers.IntegerField(**ROW_ID),
        required=False,
        help_text="An endpoint profile id per stage, instead of the stage's route.",
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

    def create(self, validated_data):
        return type(self).job_create(**validated_data)


class _RolloutLimitsSerializer(_JobParametersSerializer):
    max_steps = serializers.IntegerField(min_value=1, max_value=100, default=12, help_text="Agent steps per rollout.")
    max_errors = serializers.IntegerField(
        min_value=1, max_value=50, default=3, help_text="Tool errors before a rollout stops."
    )
    user_turns = serializers.IntegerField(
        min_value=0, max_value=20, default=0, help_text="Extra turns by the simulated user."
    )


class SynthesizeJobSerializer(_RolloutLimitsSerializer):
    """`synthesize`: domains → APIs → tasks → rollouts (the `synthesize` command)."""

    job_create = staticmethod(synthesis_job_create)

    domains = CappedListField(
        cap="SIMIA_MAX_DOMAINS_PER_JOB",
        child=serializers.SlugField(max_length=80),
        min_length=1,
        help_text="Domain names to synthesize (new ones are created).",
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
        return list(dict.fromkeys(value))  # a name given twice is one domain

    def validate(self, data):
        # Two synthesis units per domain, then a rollout unit per rollout of each task.
        units_cap_check(len(data["domains"]) * (2 + data["tasks"] * data["rollouts"]))
        return data


class RolloutJobSerializer(_RolloutLimitsSerializer):
    """`rollout`: more rollouts on a domain's valid tasks (the `rollout` command)."""

    job_create = staticmethod(rollout_job_create)

    domain = serializers.SlugField(max_length=80, help_text="An existing domain.")
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
        available = valid_task_count(domain_name=data["domain"])
        units_cap_check(min(data.get("tasks") or available, available) * data["rollouts"])
        return data


class AmplifyJobSerializer(_JobParametersSerializer):
    """`amplify`: new trajectories written from usable seeds (the `amplify` command)."""

    job_create = staticmethod(amplification_job_create)

    count = CappedIntegerField(cap="SIMIA_MAX_UNITS_PER_JOB", min_value=1, help_text="Trajectories to write.")
    domain = serializers.SlugField(
        required=False, allow_null=True, max_length=80, help_text="Only seeds of this domain."
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


class SynthesisForm(JobParametersForm):
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


class RolloutForm(JobParametersForm):
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


class AmplifyForm(JobParametersForm):
    kind = AMPLIFY

    count = forms.IntegerField(initial=10, help_text="How many new trajectories to write.")
    domain = forms.ModelChoiceField(Domain.objects.all(), to_field_name="name", required=False, empty_label="All")
    seed_ids = forms.CharField(required=False, help_text="Seed ids, separated by commas (empty: every usable seed).")
    strategy = forms.ChoiceField(choices=[(s, s.replace("_", " ")) for s in STRATEGIES])
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
