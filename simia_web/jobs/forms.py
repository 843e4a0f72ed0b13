"""A job kind's queue form: it parses what the page sends; the kind's parameters serializer judges it."""

from typing import Any

from django import forms
from rest_framework import serializers
from rest_framework.fields import empty

from simia_web.core.forms import GatedJSONField

from .kinds import JobKind, job_kind_for
from .parameters import DescribedChoiceField


class JobParametersForm(forms.Form):
    """Fields of the page (text to split, a domain to choose); ranges and caps are the serializer's alone.

    Each input starts at the serializer's default, and an integer input gets its bounds as HTML min/max, so the
    browser says it first.
    """

    kind: str

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rules = job_kind_for(self.kind).parameters_serializer()().fields
        for name, field in self.fields.items():
            rule = rules.get(name)
            if rule is None:
                continue
            if field.initial is None and rule.default is not empty:
                field.initial = rule.default
            for attr in ("min_value", "max_value"):
                if getattr(rule, attr, None) is not None:
                    field.widget.attrs[attr.removesuffix("_value")] = getattr(rule, attr)

    def parameters(self) -> dict:
        """The values given (an empty input is left to the serializer's default)."""
        return {name: value for name, value in self.cleaned_data.items() if value not in (None, "", [])}


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


def job_kind_form(job_kind: JobKind) -> type[JobParametersForm]:
    """The kind's queue form: an input for each of its parameters, the kind's own form's where it declares one (a
    domain to choose from a list), else one made from the serializer, so that no parameter is missing from the page.

    Made for each request: a described choice says what it means now."""
    base = job_kind.form or JobParametersForm
    rules = job_kind.parameters_serializer()().fields
    made = {
        name: _form_field(rule) for name, rule in rules.items() if not rule.read_only and name not in base.base_fields
    }
    return type(f"{type(job_kind).__name__}Form", (base,), {"kind": job_kind.kind, **made})
