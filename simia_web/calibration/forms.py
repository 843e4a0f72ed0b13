"""Forms of the calibration pages: the rating panel's fields, and handing items to annotators."""

from django import forms
from django.contrib.auth import get_user_model
from django.http import QueryDict

from simia_web.core.rest import query_length_check
from simia_web.curation.selectors.people import workspace_people
from simia_web.jobs.forms import ItemsField
from simia_web.simulation.judge import CRITERIA

from .models import ConsensusRule

# Message labels the panel offers beyond those saved: one blank row to add another.
BLANK_LABEL_ROWS = 1
# Most message labels one save takes (a row each).
LABEL_ROWS_MAX = 200


def rating_posted(post: QueryDict) -> dict:
    """The rating panel's fields as rating_save takes them: scores per criterion, the comment and the message
    labels (rows `label-<n>-index`, `-types`, `-comment`; a row without an index is left out)."""
    scores = {c: post.get(f"score-{c}", "") for c in CRITERIA}
    labels: dict[str, dict] = {}
    for row in range(LABEL_ROWS_MAX):
        index = post.get(f"label-{row}-index", "").strip()
        if not index:
            continue
        entry = labels.setdefault(index, {"error_types": [], "comment": ""})
        entry["error_types"] += post.getlist(f"label-{row}-types")
        entry["comment"] = " ".join(filter(None, [entry["comment"], post.get(f"label-{row}-comment", "").strip()]))
    return {"scores": scores, "comment": post.get("comment", ""), "message_labels": labels}


class AssignmentForm(forms.Form):
    """Items by the review queue's filters (its query string) or by ids, to `overlap` of the annotators chosen."""

    query = forms.CharField(
        required=False,
        max_length=2000,
        label="Queue filter",
        help_text="The review queue's filters as in its address, e.g. domain=retail&status=pending.",
    )
    ids = ItemsField(required=False, label="Or trajectory ids", help_text="Separated by spaces or commas.")
    overlap = forms.IntegerField(min_value=1, max_value=20, initial=2, label="Annotators per item (k)")
    consensus = forms.ChoiceField(
        choices=ConsensusRule.choices,
        required=False,
        label="Consensus rule",
        help_text="Whether the k annotators' decisions decide each item together, and how; a disagreement goes to "
        "the reviewer queue.",
    )
    limit = forms.IntegerField(min_value=1, max_value=10_000, initial=100, label="At most this many items")
    # The workspace's active members (every role can annotate): set by the form's workspace.
    annotators = forms.ModelMultipleChoiceField(
        get_user_model().objects.none(), widget=forms.CheckboxSelectMultiple, to_field_name="username"
    )

    def __init__(self, *args, workspace_ids: list[int], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["annotators"].queryset = workspace_people(workspace_ids=workspace_ids)  # type: ignore[attr-defined]

    def clean_ids(self) -> list[int]:
        try:
            return [int(value) for value in self.cleaned_data["ids"]]
        except ValueError:
            raise forms.ValidationError("Trajectory ids are whole numbers.") from None

    def clean_query(self) -> QueryDict | None:
        query = self.cleaned_data["query"].strip().lstrip("?")
        if not query:
            return None
        params = QueryDict(query)
        query_length_check(params)
        return params

    def clean(self):
        data = super().clean() or {}
        if not self.errors and not data.get("query") and not data.get("ids"):
            raise forms.ValidationError("Give a queue filter or trajectory ids.")
        return data
