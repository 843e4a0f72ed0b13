"""Form fields whose JSON goes through the input gate, and a service's refusal shown on a form."""

from django import forms
from django.core.exceptions import ValidationError
from django.forms.fields import InvalidJSONInput

from .errors import ValidationFailed
from .json_input import JsonInvalid, JsonRefused, json_parse


class GatedJSONField(forms.JSONField):
    """Django's JSON form field, parsing with the gate's limits (depth, sizes, 64-bit numbers, no NaN)."""

    def to_python(self, value):
        if isinstance(value, str) and value not in self.empty_values:
            try:
                json_parse(value, where=str(self.label or ""))
            except JsonInvalid:
                raise ValidationError(self.error_messages["invalid"], code="invalid", params={"value": value}) from None
            except JsonRefused as exc:
                raise ValidationError(str(exc), code="invalid") from None
        return super().to_python(value)

    def bound_data(self, data, initial):
        """The posted text, parsed for showing again in the form; text the gate refuses is shown as typed."""
        if self.disabled or data is None:
            return initial if self.disabled else None
        try:
            return json_parse(data)
        except JsonRefused:
            return InvalidJSONInput(data)


def form_errors_add(form: forms.BaseForm, exc: ValidationFailed) -> None:
    """Show a service's refusal on the form: per field when it names one of the form's, at the top when it names
    none (`detail`), else at the top with its name."""
    for name, errors in exc.errors.items():
        if name in form.fields:
            form.add_error(name, errors)
        elif name == "detail":
            form.add_error(None, errors)
        else:
            form.add_error(None, [f"{name}: {error}" for error in errors])
