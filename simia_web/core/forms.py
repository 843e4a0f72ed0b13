"""Form fields whose JSON goes through the input gate."""

from django import forms
from django.core.exceptions import ValidationError

from .json_input import JsonRefused, json_parse


class GatedJSONField(forms.JSONField):
    """Django's JSON form field, parsing with the gate's limits (depth, sizes, 64-bit numbers, no NaN)."""

    def to_python(self, value):
        if isinstance(value, str) and value not in self.empty_values:
            try:
                json_parse(value, where=self.label or "")
            except JsonRefused as exc:
                raise ValidationError(str(exc), code="invalid") from None
        return super().to_python(value)
