from django import forms
from django.contrib.auth import get_user_model

from simia_web.catalog.models import Domain

from .models import TrajectoryStatus
from .selectors import QueueFilters

STATUS_CHOICES = [("pending", "Waiting for review"), ("all", "Any status"), *TrajectoryStatus.choices]
VERDICT_CHOICES = [("", "Any verdict"), ("fail", "Judge: fail"), ("pass", "Judge: pass"), ("none", "No verdict")]


class QueueFilterForm(forms.Form):
    domain = forms.ModelChoiceField(Domain.objects.all(), required=False, empty_label="Any domain")
    job = forms.IntegerField(required=False, min_value=1, widget=forms.NumberInput(attrs={"placeholder": "Job id"}))
    status = forms.ChoiceField(choices=STATUS_CHOICES, required=False)
    verdict = forms.ChoiceField(choices=VERDICT_CHOICES, required=False)
    score_min = forms.FloatField(required=False, widget=forms.NumberInput(attrs={"step": "0.05", "placeholder": "min"}))
    score_max = forms.FloatField(required=False, widget=forms.NumberInput(attrs={"step": "0.05", "placeholder": "max"}))
    violation = forms.CharField(required=False, max_length=40)
    q = forms.CharField(required=False, max_length=200, widget=forms.TextInput(attrs={"placeholder": "Search text"}))
    mine = forms.BooleanField(required=False, label="Assigned to me")

    def filters(self, user) -> QueueFilters:
        data = self.cleaned_data if self.is_valid() else {}
        return QueueFilters(
            domain=data["domain"].pk if data.get("domain") else None,
            job=data.get("job"),
            status=data.get("status") or "pending",
            verdict=data.get("verdict") or "",
            score_min=data.get("score_min"),
            score_max=data.get("score_max"),
            violation=(data.get("violation") or "").strip(),
            text=(data.get("q") or "").strip(),
            assigned=user.pk if data.get("mine") else None,
        )


class BulkForm(forms.Form):
    ACTIONS = [("accept", "Accept"), ("reject", "Reject"), ("assign", "Assign to"), ("unassign", "Unassign")]
    action = forms.ChoiceField(choices=ACTIONS)
    scope = forms.ChoiceField(choices=[("selected", "Selected"), ("all", "All matching the filter")])
    ids = forms.TypedMultipleChoiceField(coerce=int, required=False, choices=[])
    reason = forms.CharField(required=False, max_length=2000)
    assignee = forms.ModelChoiceField(
        get_user_model().objects.filter(is_active=True).order_by("username"), required=False, empty_label="Assignee"
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # Ids are checked against the filtered queue in the view; accept any integer here.
        self.fields["ids"].valid_value = lambda value: str(value).isdigit()

    def clean(self):
        data = super().clean()
        if data.get("action") == "reject" and not (data.get("reason") or "").strip():
            self.add_error("reason", "A rejection needs a reason.")
        if data.get("action") == "assign" and not data.get("assignee"):
            self.add_error("assignee", "Choose who to assign to.")
        if data.get("scope") == "selected" and not data.get("ids"):
            self.add_error("ids", "Select at least one trajectory.")
        return data


class AgreementFilterForm(forms.Form):
    domain = forms.ModelChoiceField(Domain.objects.all(), required=False, empty_label="Any domain")
    job = forms.IntegerField(required=False, min_value=1, widget=forms.NumberInput(attrs={"placeholder": "Job id"}))
    profile = forms.IntegerField(required=False, widget=forms.HiddenInput)

    def __init__(self, *args, profiles=(), **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["profile"] = forms.TypedChoiceField(
            choices=[("", "Any judge profile"), *[(p.pk, str(p)) for p in profiles]],
            coerce=int,
            required=False,
            empty_value=None,
        )
