"""The audit pages' forms: a new audit (the population's filters, sample size, strategy, seed, blind) and the
ceiling for accepting the rest."""

from django import forms
from django.http import QueryDict

from simia_web.curation.filters import PENDING, VERDICTS
from simia_web.curation.models import TrajectoryStatus

from .models import Strategy

STATUS_CHOICES = [(PENDING, "Waiting for review"), ("all", "Any status"), *TrajectoryStatus.choices]


class AuditForm(forms.Form):
    """A new audit: the population as queue filters (the common ones as fields, any other in the queue's own query
    string), the sample size, the strategy, the seed and blind mode. The service checks the rules."""

    domain = forms.ChoiceField(required=False)
    status = forms.ChoiceField(choices=STATUS_CHOICES, required=False, initial=PENDING)
    verdict = forms.ChoiceField(choices=[("", "Any verdict"), *VERDICTS], required=False)
    min_score = forms.CharField(required=False, max_length=20, label="Judge score at least")
    max_score = forms.CharField(required=False, max_length=20, label="Judge score at most")
    other = forms.CharField(
        required=False,
        max_length=2000,
        label="Other filters",
        help_text="As in the review queue's address, e.g. job=12&violation=unknown_tool&q=refund",
    )
    sample_size = forms.IntegerField(min_value=1, initial=300, label="Sample size")
    strategy = forms.ChoiceField(choices=Strategy.choices, initial=Strategy.ACTIVE)
    seed = forms.IntegerField(required=False, min_value=0, help_text="Leave empty for a random one.")
    blind = forms.BooleanField(
        required=False, initial=True, label="Blind: hide the judge on an item until it is decided"
    )

    def __init__(self, *args, domains=(), **kwargs):
        super().__init__(*args, **kwargs)
        domain = self.fields["domain"]
        assert isinstance(domain, forms.ChoiceField)
        domain.choices = [("", "Any domain"), *((name, name) for name in domains)]

    def filters(self) -> dict:
        data = self.cleaned_data
        filters = dict(QueryDict(data["other"]).items()) if data.get("other") else {}
        for name in ("domain", "status", "verdict", "min_score", "max_score"):
            if data.get(name):
                filters[name] = data[name]
        return filters


class CeilingForm(forms.Form):
    max_error_rate = forms.DecimalField(
        min_value=0, max_value=100, decimal_places=2, label="Ceiling (% a person would reject, at most)"
    )

    def share(self) -> float:
        return float(self.cleaned_data["max_error_rate"]) / 100
