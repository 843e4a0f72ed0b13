import json

from django import forms

from simia_web.core.forms import GatedJSONField

from .models import ApiKind


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
