from django import forms

from .models import WebhookEvent


class WebhookSubscriptionForm(forms.Form):
    name = forms.CharField(max_length=100)
    url = forms.URLField(max_length=500, label="URL", assume_scheme="https")
    events = forms.MultipleChoiceField(choices=WebhookEvent.choices, widget=forms.CheckboxSelectMultiple)
    active = forms.BooleanField(required=False, initial=True)
