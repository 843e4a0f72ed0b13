import json

from django import forms

from simia_web.core.forms import GatedJSONField
from simia_web.synthesis.amplify import STRATEGIES
from simia_web.synthesis.rules import DEFAULT_MAX_MESSAGES, DEFAULT_MIN_MESSAGES

from .models import ApiKind, Domain


class PrettyJSONField(GatedJSONField):
    """A JSON textarea that shows its value indented, for reading and editing by hand."""

    widget = forms.Textarea(attrs={"rows": 14, "class": "mono"})

    def prepare_value(self, value):
        if isinstance(value, forms.fields.InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class VersionedForm(forms.Form):
    """An edit form whose fields (but the note) are attributes of the row edited."""

    version = forms.IntegerField(widget=forms.HiddenInput)
    note = forms.CharField(required=False, max_length=300, help_text="What changed and why (kept in the history).")

    @classmethod
    def initial_for(cls, obj) -> dict:
        return {name: getattr(obj, name) for name in cls.base_fields if name != "note"}


class DomainEditForm(VersionedForm):
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    policy = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 10}))
    state_schema = PrettyJSONField(help_text="JSON Schema of the world state (an object schema).")
    initial_state = PrettyJSONField(help_text="The world state every rollout starts from; must match the schema.")


class ApiEditForm(VersionedForm):
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    kind = forms.ChoiceField(choices=ApiKind.choices)
    parameters = PrettyJSONField(help_text="JSON Schema of the arguments (an object schema).")
    returns = PrettyJSONField(required=False, help_text="JSON Schema of the result.")

    def clean_returns(self):
        return self.cleaned_data["returns"] or {}


class TaskEditForm(VersionedForm):
    instruction = forms.CharField(widget=forms.Textarea(attrs={"rows": 4}))
    expected_outcome = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    apis_needed = PrettyJSONField(required=False, help_text='A JSON list of API names, e.g. ["get_order"].')
    difficulty = forms.CharField(required=False, max_length=16)

    def clean_apis_needed(self):
        value = self.cleaned_data["apis_needed"]
        return [] if value is None else value


class SeedEditForm(VersionedForm):
    messages = PrettyJSONField(help_text="OpenAI chat messages.")
    tools = PrettyJSONField(required=False, help_text="OpenAI tools list.")

    def clean_tools(self):
        value = self.cleaned_data["tools"]
        return [] if value is None else value


class SynthesisForm(forms.Form):
    domains = forms.CharField(help_text="Domain names (slugs), separated by commas or spaces.")
    apis = forms.IntegerField(min_value=1, max_value=50, initial=8)
    tasks = forms.IntegerField(min_value=1, max_value=500, initial=10)
    rollouts = forms.IntegerField(min_value=1, max_value=64, initial=1)
    max_steps = forms.IntegerField(min_value=1, max_value=100, initial=12)
    max_errors = forms.IntegerField(min_value=1, max_value=50, initial=3)
    user_turns = forms.IntegerField(min_value=0, max_value=20, initial=0)

    def clean_domains(self) -> list[str]:
        return [n for n in self.cleaned_data["domains"].replace(",", " ").split() if n]


class RolloutForm(forms.Form):
    domain = forms.ModelChoiceField(Domain.objects.all(), to_field_name="name")
    rollouts = forms.IntegerField(min_value=1, max_value=64, initial=1)
    tasks = forms.IntegerField(min_value=1, max_value=500, required=False, help_text="Empty: every valid task.")
    max_steps = forms.IntegerField(min_value=1, max_value=100, initial=12)
    max_errors = forms.IntegerField(min_value=1, max_value=50, initial=3)
    user_turns = forms.IntegerField(min_value=0, max_value=20, initial=0)

    def clean_domain(self) -> str:
        return self.cleaned_data["domain"].name


class AmplifyForm(forms.Form):
    count = forms.IntegerField(min_value=1, initial=10, help_text="How many new trajectories to write.")
    domain = forms.ModelChoiceField(Domain.objects.all(), to_field_name="name", required=False, empty_label="All")
    seed_ids = forms.CharField(required=False, help_text="Seed ids, separated by commas (empty: every usable seed).")
    strategy = forms.ChoiceField(choices=[(s, s.replace("_", " ")) for s in STRATEGIES], initial="round_robin")
    rng_seed = forms.IntegerField(required=False, help_text="Fix the random choices to repeat a run.")
    min_messages = forms.IntegerField(min_value=1, max_value=1000, initial=DEFAULT_MIN_MESSAGES)
    max_messages = forms.IntegerField(min_value=1, max_value=1000, initial=DEFAULT_MAX_MESSAGES)

    def clean_seed_ids(self):
        raw = self.cleaned_data["seed_ids"].replace(",", " ").split()
        if not all(part.isdigit() for part in raw):
            raise forms.ValidationError("Seed ids are whole numbers.")
        return [int(part) for part in raw] or None

    def clean_domain(self) -> str | None:
        domain = self.cleaned_data["domain"]
        return domain.name if domain else None
