"""A job kind's queue form: it parses what the page sends; the kind's parameters serializer judges it."""

from dataclasses import dataclass
from typing import Any, ClassVar

from django import forms
from django.urls import reverse
from rest_framework import serializers
from rest_framework.fields import empty

from simia_web.core.forms import GatedJSONField
from simia_web.llm.models import EndpointProfile, Stage

from .kinds import JobKind, job_kind_for
from .parameters import DescribedChoiceField


@dataclass(frozen=True)
class Notice:
    """A line the queue page shows above its form: why a list is empty or a job cannot run yet, and where to fix it."""

    text: str
    href: str = ""
    link: str = ""


# Labels of parameters whose names do not read as words ("Apis", "Rng seed").
LABELS = {
    "apis": "APIs per domain",
    "tasks": "Tasks",
    "max_steps": "Agent steps per rollout",
    "max_errors": "Tool errors before a rollout stops",
    "user_turns": "Extra user turns",
    "rng_seed": "Random seed",
    "seed_ids": "Seed ids",
    "min_messages": "Fewest messages",
    "max_messages": "Most messages",
}

# The parameter that names an endpoint profile per stage: the page offers one list of profiles per stage.
PROFILES = "profiles"
PROFILE_PREFIX = "profiles__"


class JobParametersForm(forms.Form):
    """Fields of the page (text to split, a domain to choose); ranges and caps are the serializer's alone.

    Each input starts at the serializer's default, and an integer input gets its bounds as HTML min/max, so the
    browser says it first.
    """

    kind: str
    # Why a required list of choices may be empty, and where it is filled: field -> (text, URL name, link text).
    empty_choices: ClassVar[dict[str, tuple[str, str, str]]] = {
        "domain": ("There is no domain yet: a job needs one.", "domain-new", "Create a domain"),
    }

    def __init__(self, *args, workspace=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.workspace = workspace  # the workspace the page queues in (its domains are the choices)
        rules = job_kind_for(self.kind).parameters_serializer()().fields
        for name, field in self.fields.items():
            if field.label is None:
                field.label = LABELS.get(name)
            rule = rules.get(name)
            if rule is None:
                continue
            if not field.help_text and rule.help_text:
                field.help_text = str(rule.help_text)
            if field.initial is None and rule.default is not empty:
                field.initial = rule.default
            for attr in ("min_value", "max_value"):
                if getattr(rule, attr, None) is not None:
                    field.widget.attrs[attr.removesuffix("_value")] = getattr(rule, attr)

    def parameters(self) -> dict:
        """The values given (an empty input is left to the serializer's default); the profile chosen per stage
        becomes the `profiles` parameter."""
        given = {name: value for name, value in self.cleaned_data.items() if value not in (None, "", [])}
        chosen = [name for name in given if name.startswith(PROFILE_PREFIX)]
        profiles = {name.removeprefix(PROFILE_PREFIX): int(given.pop(name)) for name in chosen}
        if profiles:
            given[PROFILES] = profiles
        return given

    def notices(self) -> list[Notice]:
        """What the page says before the form: a required list with nothing to choose, why and where it is filled,
        and what the kind needs first (`prerequisites`)."""
        found = []
        for name, field in self.fields.items():
            queryset = field.queryset if isinstance(field, forms.ModelChoiceField) else None
            if queryset is not None and field.required and not queryset.exists():
                default = (f"There is nothing to choose as {str(field.label or name).lower()} yet.", "", "")
                text, url_name, link = self.empty_choices.get(name, default)
                found.append(Notice(text, reverse(url_name) if url_name else "", link))
        return found + self.prerequisites()

    def prerequisites(self) -> list[Notice]:
        """What must exist before a job of the kind can run (a kind's form says; nothing by default)."""
        return []

    def main_fields(self) -> list[forms.BoundField]:
        return [field for field in self if not field.name.startswith(PROFILE_PREFIX)]

    def profile_fields(self) -> list[forms.BoundField]:
        return [field for field in self if field.name.startswith(PROFILE_PREFIX)]


class ItemsField(forms.CharField):
    """A list typed as items separated by spaces or commas."""

    # The field's Python value is the list of its items, where CharField's stub says text.
    def to_python(self, value) -> list[str]:  # type: ignore[override]
        return (super().to_python(value) or "").replace(",", " ").split()

    def prepare_value(self, value):
        return " ".join(map(str, value)) if isinstance(value, list | tuple) else value


class ParameterJSONField(GatedJSONField):
    """A JSON parameter (a dict of profiles per stage): an empty input, not `null`, while it has no value, so that
    the serializer's default applies."""

    def prepare_value(self, value):
        return "" if value is None else super().prepare_value(value)


# Long text gets a text area: a policy, a description.
TEXT_AREA_FROM = 500


def _form_field(rule: serializers.Field) -> forms.Field:
    """The page's input for one parameter: it only parses; the serializer checks the value."""
    common: dict[str, Any] = {"required": rule.required, "help_text": rule.help_text or "", "label": rule.label}
    if isinstance(rule, serializers.BooleanField):
        return forms.BooleanField(**{**common, "required": False})
    if isinstance(rule, serializers.IntegerField):
        return forms.IntegerField(**common)
    if isinstance(rule, serializers.FloatField | serializers.DecimalField):
        return forms.FloatField(**common)
    if isinstance(rule, serializers.ChoiceField):
        choices: list[tuple[str, str]] = [("", "—")] if not rule.required and rule.default is empty else []
        labels = {**rule.choices, **rule.describe()} if isinstance(rule, DescribedChoiceField) else rule.choices
        return forms.ChoiceField(choices=[*choices, *labels.items()], **common)
    if isinstance(rule, serializers.ListField):
        help_text = " ".join(filter(None, [str(rule.help_text or ""), "Separate by spaces."]))
        return ItemsField(**{**common, "help_text": help_text})
    if isinstance(rule, serializers.DictField | serializers.JSONField):
        return ParameterJSONField(widget=forms.Textarea(attrs={"rows": 2}), **common)
    long_text = (getattr(rule, "max_length", None) or TEXT_AREA_FROM) >= TEXT_AREA_FROM
    return forms.CharField(widget=forms.Textarea(attrs={"rows": 3}) if long_text else None, **common)


def _profile_fields() -> dict[str, forms.Field]:
    """One list of endpoint profiles per stage, in place of a JSON object of profile ids."""
    profiles = [("", "the stage's route")] + [
        (str(pk), name) for pk, name in EndpointProfile.objects.order_by("name").values_list("pk", "name")
    ]
    return {
        f"{PROFILE_PREFIX}{stage}": forms.ChoiceField(
            label=f"{label} endpoint",  # beside a kind's own field named after the stage (the judge configuration)
            choices=profiles,
            required=False,
            help_text=f"The endpoint profile for the {label.lower()} stage (empty: the one routed on the LLM "
            "endpoints page, else the default).",
        )
        for stage, label in Stage.choices
    }


def job_kind_form(job_kind: JobKind) -> type[JobParametersForm]:
    """The kind's queue form: an input for each of its parameters, the kind's own form's where it declares one (a
    domain to choose from a list), else one made from the serializer, so that no parameter is missing from the page.

    Made for each request: a described choice says what it means now."""
    base = job_kind.form or JobParametersForm
    rules = job_kind.parameters_serializer()().fields
    made = {
        name: _form_field(rule) for name, rule in rules.items() if not rule.read_only and name not in base.base_fields
    }
    if isinstance(rules.get(PROFILES), serializers.DictField) and PROFILES not in base.base_fields:
        del made[PROFILES]
        made.update(_profile_fields())
    return type(f"{type(job_kind).__name__}Form", (base,), {"kind": job_kind.kind, **made})
