"""The Users page's forms (admins): create or invite a user, change a role, reset a password."""

from django import forms

from .models import Role, User

SET_PASSWORD, INVITE = "password", "invite"


def _password_fields() -> tuple[forms.CharField, forms.CharField]:
    attrs = {"autocomplete": "new-password"}
    first = forms.CharField(
        label="Password",
        required=False,
        strip=False,
        widget=forms.PasswordInput(attrs=attrs),
        help_text="At least 10 characters, not all digits, not a common password nor close to the username.",
    )
    second = forms.CharField(
        label="Password again",
        required=False,
        strip=False,
        widget=forms.PasswordInput(attrs=attrs),
        help_text="The same password, to catch a typing mistake.",
    )
    return first, second


class UserCreateForm(forms.Form):
    username = forms.RegexField(
        regex=r"^[\w.@+-]+\Z",
        max_length=150,
        help_text="Letters, digits and @ . + - _ only; what the user logs in with.",
        error_messages={"invalid": "Use only letters, digits and @ . + - _."},
    )
    email = forms.EmailField(required=False, help_text="Optional: where to send the invitation yourself.")
    role = forms.ChoiceField(
        choices=Role.choices,
        initial=Role.ANNOTATOR,
        help_text="Annotators review; curators also edit the catalog, queue jobs and export; admins also manage "
        "users and LLM endpoints.",
    )
    how = forms.ChoiceField(
        label="Password",
        choices=[(INVITE, "Make an invitation link: they choose their password"), (SET_PASSWORD, "Set it now")],
        widget=forms.RadioSelect,
        initial=INVITE,
        help_text="An invitation link works once, for a few days (PASSWORD_RESET_TIMEOUT); send it yourself.",
    )
    password1, password2 = _password_fields()

    def clean_username(self):
        username = self.cleaned_data["username"]
        if User.objects.filter(username__iexact=username).exists():
            raise forms.ValidationError("A user with this name exists already: choose another, or edit that one.")
        return username

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if data.get("how") == SET_PASSWORD:
            if not data.get("password1"):
                self.add_error("password1", "Enter the password, or choose an invitation link.")
            elif data.get("password1") != data.get("password2"):
                self.add_error("password2", "The two passwords differ.")
        return data


class UserEditForm(forms.Form):
    email = forms.EmailField(required=False, help_text="Optional.")
    role = forms.ChoiceField(choices=Role.choices, help_text=UserCreateForm.base_fields["role"].help_text)
    is_active = forms.BooleanField(
        label="Active",
        required=False,
        help_text="Untick to deactivate: they can no longer log in or use the API; their work stays.",
    )


class PasswordSetForm(forms.Form):
    password1, password2 = _password_fields()

    def clean(self):
        super().clean()
        data = self.cleaned_data
        if not data.get("password1"):
            self.add_error("password1", "Enter the new password.")
        elif data.get("password1") != data.get("password2"):
            self.add_error("password2", "The two passwords differ.")
        return data
