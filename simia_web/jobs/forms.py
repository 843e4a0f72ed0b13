"""The base of a job kind's queue form: it parses what the page sends; the kind's parameters serializer judges it."""

from django import forms
from rest_framework.fields import empty

from .pipelines import pipeline_for


class JobParametersForm(forms.Form):
    """Fields of the page (text to split, a domain to choose); ranges and caps are the serializer's alone.

    Each input starts at the serializer's default, and an integer input gets its bounds as HTML min/max, so the
    browser says it first.
    """

    kind: str

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        rules = pipeline_for(self.kind).parameters().fields
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
