"""The catalog's forms: editing a domain, an API, a task or a seed against the version it was read at, and creating
a domain, an API or a task."""

import json
from typing import cast

from django import forms

from simia_web.accounts.models import default_workspace_id
from simia_web.core.forms import GatedJSONField

from .models import ApiKind, Domain
from .selectors import domains_in


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


# --- Made by hand -----------------------------------------------------------------------------------------------


class DomainChoiceField(forms.ModelChoiceField):
    """A domain of the page's workspace, chosen by name; the form that holds it sets the workspace (`WorkspaceForm`)."""

    def __init__(self, **kwargs):
        super().__init__(Domain.objects.none(), to_field_name="name", empty_label="Choose a domain", **kwargs)


class WorkspaceForm(forms.Form):
    """A create form whose `domain` is chosen among the domains of `workspace_ids` (the page's current workspace):
    another workspace's domain is not a choice, so nothing is made under it."""

    def __init__(self, *args, workspace_ids, **kwargs):
        super().__init__(*args, **kwargs)
        field = cast(DomainChoiceField, self.fields["domain"])
        field.queryset = domains_in(workspace_ids=workspace_ids).order_by("name").only("id", "name", "workspace_id")


class WorkspaceDomainsForm(forms.Form):
    """A job's queue form (put before jobs.forms.JobParametersForm) whose domain choices are the domains of the
    workspace the page works in (`workspace`; the `default` one when None, as the job's parameters are read), and
    `workspace_domains` those domains for its notices."""

    def __init__(self, *args, workspace=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.workspace_id: int = default_workspace_id() if workspace is None else workspace.pk
        self.workspace_domains = Domain.objects.filter(workspace_id=self.workspace_id)
        for field in self.fields.values():
            if not isinstance(field, forms.ModelChoiceField):
                continue
            queryset = field.queryset
            if queryset is not None and queryset.model is Domain:
                field.queryset = queryset.filter(workspace_id=self.workspace_id)


class DomainCreateForm(forms.Form):
    name = forms.SlugField(
        max_length=80,
        help_text="Lower-case letters, digits, - and _ (e.g. retail, flight-booking): used in addresses and exports.",
        error_messages={"invalid": "Use only lower-case letters, digits, - and _, e.g. retail or flight-booking."},
    )
    description = forms.CharField(
        required=False,
        max_length=2000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the domain is about, in a sentence or two: synthesis writes its APIs and tasks from it.",
    )
    policy = forms.CharField(
        required=False,
        max_length=100_000,
        widget=forms.Textarea(attrs={"rows": 10}),
        help_text="The rules the agent must follow, in Markdown (e.g. 'Refunds need the order id and a reason.'). "
        "The agent and the judge read it.",
    )


EMPTY_PARAMETERS = {"type": "object", "properties": {}, "required": []}


class ApiCreateForm(WorkspaceForm):
    domain = DomainChoiceField(help_text="The domain the API belongs to.")
    name = forms.CharField(
        max_length=64,
        help_text="snake_case, as the agent calls it: a lower-case letter, then letters, digits or _ (e.g. get_order).",
    )
    description = forms.CharField(
        required=False,
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What the API does, for the agent and the simulator.",
    )
    kind = forms.ChoiceField(
        choices=ApiKind.choices,
        help_text="Read-only APIs leave the world state as it is; state-changing ones patch it.",
    )
    parameters = PrettyJSONField(
        initial=EMPTY_PARAMETERS,
        help_text='JSON Schema of the arguments, an object schema: {"type": "object", "properties": {"order_id": '
        '{"type": "string"}}, "required": ["order_id"]}.',
    )
    returns = PrettyJSONField(required=False, help_text="JSON Schema of the result (optional).")

    def clean_returns(self):
        return self.cleaned_data["returns"] or {}


class TaskCreateForm(WorkspaceForm):
    domain = DomainChoiceField(help_text="The domain whose APIs the task uses.")
    instruction = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        max_length=20_000,
        help_text="What the user asks the agent to do, as the user would say it (e.g. 'Cancel order W1: it came in "
        "the wrong size.').",
    )
    expected_outcome = forms.CharField(
        required=False,
        max_length=20_000,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="How the world should look when the task is done; the judge checks the trajectory against it.",
    )
    apis_needed = forms.CharField(
        required=False,
        max_length=4000,
        label="APIs needed",
        help_text="Names of the domain's APIs the task needs, separated by commas or spaces (optional).",
    )
    difficulty = forms.ChoiceField(
        required=False,
        choices=[("", "not said"), ("easy", "easy"), ("medium", "medium"), ("hard", "hard")],
        help_text="Optional: kept with the task and its trajectories.",
    )

    def clean_apis_needed(self) -> list[str]:
        return list(dict.fromkeys(self.cleaned_data["apis_needed"].replace(",", " ").split()))
