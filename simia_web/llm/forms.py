"""The LLM endpoints page's forms: a profile (its key entered here is stored encrypted, never shown again) and the
stage routes."""

from django import forms
from django.conf import settings

from simia_web.core.forms import GatedJSONField

from .keys import api_key_decrypt, profile_key_stored
from .models import EndpointProfile, Stage
from .validation import api_key_env_allowed, url_redacted

KEY_STORED, KEY_ENV = "stored", "env"


class EndpointProfileForm(forms.ModelForm):
    """A profile as an admin edits it. The key is typed into a password input that is never filled back in: left
    empty, the stored key stays. While the profile follows the environment, its base URL, model and key come from
    OPENAI_BASE_URL, SIMIA_MODEL and OPENAI_API_KEY, and what is typed into those fields is not used."""

    key_source = forms.ChoiceField(
        label="API key from",
        choices=[(KEY_STORED, "a key stored here, encrypted"), (KEY_ENV, "an environment variable")],
        widget=forms.RadioSelect,
        initial=KEY_ENV,
        help_text="A stored key is encrypted at rest and never shown again; an environment variable must be set on "
        "the web and worker machines.",
    )
    api_key = forms.CharField(
        label="API key",
        required=False,
        max_length=4000,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "new-password"}),
        help_text="Leave empty to keep the key already stored. Servers that take no key (vLLM, llama.cpp, Ollama) "
        "need none.",
    )
    stage_max_tokens = GatedJSONField(
        required=False,
        label="Answer size per stage",
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}),
        help_text='Tokens per answer by stage, overriding the defaults, e.g. {"user_simulator": 200, "judge": 600}; '
        "empty: the defaults.",
    )

    class Meta:
        model = EndpointProfile
        fields = [
            "name",
            "follows_environment",
            "base_url",
            "model",
            "key_source",
            "api_key",
            "api_key_env",
            "is_default",
            "max_concurrency",
            "requests_per_minute",
            "tokens_per_minute",
            "timeout_seconds",
            "temperature",
            "max_tokens",
            "stage_max_tokens",
            "context_window",
            "structured_mode",
            "tool_mode",
            "price_input_per_mtok",
            "price_output_per_mtok",
            "cache_enabled",
        ]
        labels = {
            "base_url": "Base URL",
            "api_key_env": "Key variable",
            "is_default": "Default profile",
            "follows_environment": "Follows the environment",
            "max_concurrency": "Requests at once",
            "requests_per_minute": "Requests per minute",
            "tokens_per_minute": "Tokens per minute",
            "timeout_seconds": "Timeout (seconds)",
            "max_tokens": "Max tokens per answer",
            "context_window": "Context window (tokens)",
            "structured_mode": "Structured output",
            "tool_mode": "Tool calls",
            "price_input_per_mtok": "Price per million prompt tokens",
            "price_output_per_mtok": "Price per million answer tokens",
            "cache_enabled": "Cache answers",
        }
        help_texts = {
            "name": "A short name, shown on jobs and in the call log.",
            "base_url": "The OpenAI-compatible endpoint, e.g. http://127.0.0.1:8080/v1 for a llama.cpp server; empty "
            "means OpenAI's. No credentials in it: enter the key below.",
            "model": "The model name the server expects, e.g. gpt-4o-mini or the name a local server serves.",
            "api_key_env": "Used when the key comes from an environment variable: its name, ending in _API_KEY.",
            "is_default": "Serves every stage that has no route of its own (one profile at a time).",
            "follows_environment": "Take the base URL, model and key from OPENAI_BASE_URL, SIMIA_MODEL and "
            "OPENAI_API_KEY as each machine has them; the fields above and the key are then not used.",
            "temperature": "Sampling temperature of every stage (0 to 2).",
            "timeout_seconds": "How long one request may take before it is retried.",
            "structured_mode": "How JSON answers are asked for; Auto starts from what 'Test' found and falls back.",
            "tool_mode": "How tool calls are made; Auto starts from what 'Test' found and falls back.",
            "price_input_per_mtok": "For the cost shown on jobs (empty: not counted).",
            "price_output_per_mtok": "For the cost shown on jobs (empty: not counted).",
            "cache_enabled": "Answer a request identical to an earlier one from the call log, without a call.",
        }
        widgets = {"name": forms.TextInput(attrs={"autocomplete": "off"})}

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        profile = self.instance
        self.fields["model"].required = False
        self.fields["temperature"].widget.attrs.update(min=0, max=2, step="0.1")
        self.fields["timeout_seconds"].widget.attrs.update(min=1)
        if profile.pk:
            if profile.base_url:
                self.initial["base_url"] = url_redacted(profile.base_url)
            self.initial["key_source"] = KEY_STORED if profile_key_stored(profile) else KEY_ENV
        self.fields["api_key_env"].required = False

    def clean_temperature(self):
        value = self.cleaned_data["temperature"]
        if value is not None and not 0 <= value <= 2:
            raise forms.ValidationError("must be between 0 and 2")
        return value

    def clean_timeout_seconds(self):
        value = self.cleaned_data["timeout_seconds"]
        if value is not None and value <= 0:
            raise forms.ValidationError("must be more than 0 seconds")
        return value

    def clean_max_concurrency(self):
        value = self.cleaned_data["max_concurrency"]
        if value is not None and value < 1:
            raise forms.ValidationError("at least 1 request at once")
        return value

    def clean_stage_max_tokens(self):
        value = self.cleaned_data["stage_max_tokens"] or {}
        if not isinstance(value, dict):
            raise forms.ValidationError('a JSON object of stage names and token counts, e.g. {"judge": 600}')
        unknown = sorted(set(value) - set(Stage.values))
        if unknown:
            raise forms.ValidationError(f"no stage named {', '.join(unknown)}; stages: {', '.join(Stage.values)}")
        if not all(isinstance(n, int) and not isinstance(n, bool) and n > 0 for n in value.values()):
            raise forms.ValidationError("each stage's size is a whole number of tokens above 0")
        return value

    def clean_base_url(self) -> str:
        """A masked base URL sent back unchanged is the stored one, not a new one with "***" in it."""
        value = self.cleaned_data["base_url"]
        if self.instance.pk and value and value == url_redacted(self.instance.base_url):
            return self.instance.base_url
        return value

    def clean(self):
        super().clean()
        data = self.cleaned_data
        follows = data.get("follows_environment")
        if follows:
            # What each machine's environment says; the row keeps this machine's, so that the list shows them.
            data["base_url"] = settings.OPENAI_BASE_URL
            data["model"] = settings.SIMIA_MODEL
            data["api_key_env"] = settings.OPENAI_API_KEY_ENV
            self.instance.base_url = data["base_url"]
        elif not data.get("model"):
            self.add_error("model", "Name the model the server serves (or tick 'Follows the environment').")
        if data.get("key_source") == KEY_STORED:
            if not api_key_env_allowed(data.get("api_key_env") or ""):  # not used: any allowed name will do
                data["api_key_env"] = settings.OPENAI_API_KEY_ENV
            readable = bool(self.instance.api_key_encrypted) and api_key_decrypt(self.instance.api_key_encrypted)
            if not follows and not data.get("api_key") and not readable:
                self.add_error(
                    "api_key",
                    "The stored key cannot be read any more (the encryption secret changed): enter it again."
                    if self.instance.api_key_encrypted
                    else "Enter the key to store, or choose an environment variable as its source.",
                )
        elif not data.get("api_key_env"):
            self.add_error("api_key_env", "Name the variable that holds the key, e.g. OPENAI_API_KEY.")
        return data

    def key_change(self) -> str | None:
        """The key to store ("" removes the stored one), or None to leave it as it is."""
        data = self.cleaned_data
        if data.get("follows_environment"):
            return None
        if data.get("key_source") == KEY_ENV:
            return ""
        return data.get("api_key") or None


class StageRoutesForm(forms.Form):
    """One choice per stage: a profile, or the default profile."""

    def __init__(self, *args, profiles, routes: dict[str, int], **kwargs):
        super().__init__(*args, **kwargs)
        choices = [("", "the default profile"), *((str(p.pk), p.name) for p in profiles)]
        for stage, label in Stage.choices:
            self.fields[stage] = forms.ChoiceField(
                label=label,
                choices=choices,
                required=False,
                initial=str(routes.get(stage, "")),
                help_text=STAGE_HELP[stage],
            )

    def routes(self) -> dict[str, int | None]:
        return {stage: int(value) if value else None for stage, value in self.cleaned_data.items()}


STAGE_HELP: dict[str, str] = {
    Stage.API_SYNTHESIS: "Writes a domain's APIs and world state (synthesis jobs).",
    Stage.TASK_SYNTHESIS: "Writes a domain's tasks (synthesis jobs).",
    Stage.AGENT: "The agent that solves each task with tool calls.",
    Stage.SIMULATOR: "Answers the agent's tool calls and keeps the world state.",
    Stage.USER_SIMULATOR: "Plays the user in multi-turn rollouts.",
    Stage.JUDGE: "Scores every trajectory.",
    Stage.AMPLIFY: "Writes new trajectories from seeds (amplification jobs).",
}
