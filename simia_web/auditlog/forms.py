from django import forms


class AuditFilterForm(forms.Form):
    actor = forms.CharField(required=False, max_length=150, help_text="A username.")
    action = forms.CharField(
        required=False, max_length=64, help_text='An action ("membership.grant"), or a prefix ending in "."'
    )
    object = forms.CharField(
        required=False,
        max_length=130,
        help_text='A type ("accounts.user") or a type and id ("accounts.user:7").',
    )
    workspace = forms.SlugField(required=False, max_length=64)
    since = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}), help_text="From (UTC)."
    )
    until = forms.DateTimeField(
        required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}), help_text="Before (UTC)."
    )
    before = forms.IntegerField(required=False, min_value=1, widget=forms.HiddenInput)

    def filters(self):
        from .selectors import AuditFilters

        data = self.cleaned_data
        target_type, _, target_id = (data.get("object") or "").partition(":")
        return AuditFilters(
            actor=data.get("actor") or "",
            action=data.get("action") or "",
            target_type=target_type,
            target_id=target_id,
            workspace=data.get("workspace") or "",
            since=data.get("since"),
            until=data.get("until"),
        )
