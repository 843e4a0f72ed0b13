"""Building blocks of a job kind's parameters serializer: caps read from the settings, named when they refuse, and
choices a queue page describes as they stand."""

from collections.abc import Callable

from django.conf import settings
from rest_framework import serializers


def _cap_messages(cap: str, key: str, error_messages: dict | None) -> dict:
    return {key: f"at most {{{key}}} ({cap})", **(error_messages or {})}


class CappedIntegerField(serializers.IntegerField):
    """A whole number up to the value of the setting `cap`, read each time a serializer is made (so a
    changed setting applies at once), and named in the refusal."""

    def __init__(self, *, cap: str, error_messages: dict | None = None, **kwargs):
        messages = _cap_messages(cap, "max_value", error_messages)
        super().__init__(max_value=getattr(settings, cap), error_messages=messages, **kwargs)


class CappedListField(serializers.ListField):
    """A list of at most the value of the setting `cap` items, named in the refusal."""

    def __init__(self, *, cap: str, error_messages: dict | None = None, **kwargs):
        messages = _cap_messages(cap, "max_length", error_messages)
        super().__init__(max_length=getattr(settings, cap), error_messages=messages, **kwargs)


class DescribedChoiceField(serializers.ChoiceField):
    """A choice whose values stay fixed (the API, its schema and the command line name them) and which the queue
    page describes as it stands when shown: `describe()` returns {value: label} for the values it can say more of
    ("the best-calibrated prompt and endpoint (kappa 0.71, run 12)")."""

    def __init__(self, *, describe: Callable[[], dict[str, str]], **kwargs):
        self.describe = describe
        super().__init__(**kwargs)


def units_cap_refusal(units: int) -> str:
    """Why a job that would plan more units than SIMIA_MAX_UNITS_PER_JOB (its parameters' product) is refused, or ""
    within the cap. A kind's serializer refuses it under the name `units`, which every way in shows as it shows a
    parameter's refusal."""
    cap = settings.SIMIA_MAX_UNITS_PER_JOB
    if units > cap:
        return f"these parameters make {units:,} units of work; at most {cap:,} per job (SIMIA_MAX_UNITS_PER_JOB)"
    return ""
