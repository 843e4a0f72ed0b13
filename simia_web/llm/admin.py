"""The Django admin's pages for endpoint profiles, stage routes and the LLM call log; the LLM endpoints page is the
place most people set a profile up."""

from django import forms
from django.contrib import admin, messages
from django.utils.html import format_html, format_html_join

from .models import EndpointProfile, LLMCall, StageRoute
from .tasks import endpoint_check_run
from .validation import url_redacted


class EndpointProfileForm(forms.ModelForm):
    """The base URL is shown with its credentials masked; saved so, it is refused until they are taken out."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if "base_url" in self.fields and self.instance.base_url:
            self.initial["base_url"] = url_redacted(self.instance.base_url)


@admin.register(EndpointProfile)
class EndpointProfileAdmin(admin.ModelAdmin):
    form = EndpointProfileForm
    list_display = (
        "name",
        "model",
        "endpoint_url",
        "structured_mode",
        "tool_mode",
        "found_modes",
        "context_window",
        "max_concurrency",
        "requests_per_minute",
        "is_default",
    )
    search_fields = ("name", "model")
    actions = ["test_endpoint"]

    def get_readonly_fields(self, request, obj=None):
        found = ("capabilities_found", "chars_per_token", "tokens_per_second")
        # Each machine takes these from its environment while the profile follows it (see the help text).
        if obj is not None and obj.follows_environment:
            return ("endpoint_url", "model", "api_key_env", *found)
        return found

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or not obj.follows_environment:
            return fieldsets
        (name, options), *rest = fieldsets
        fields = tuple("endpoint_url" if field == "base_url" else field for field in options["fields"])
        return [(name, {**options, "fields": fields}), *rest]

    @admin.display(description="base URL")
    def endpoint_url(self, obj):
        return url_redacted(obj.base_url)

    @admin.display(description="found (structured / tools)")
    def found_modes(self, obj):
        found = obj.capabilities or {}
        return f"{found.get('structured', '?')} / {found.get('tools', '?')}" if found else "not tested"

    @admin.display(description="what the endpoint takes")
    def capabilities_found(self, obj):
        found = obj.capabilities or {}
        if not found:
            return "Not tested yet: use the action 'Test endpoint' on the list of profiles."
        summary = format_html(
            "structured output: <b>{}</b>, tools: <b>{}</b>, context window from: {} (checked {})",
            found.get("structured", "?"),
            found.get("tools", "?"),
            found.get("context_window_source", "?"),
            found.get("checked_at", "never, learned in use"),
        )
        rows = [(p["name"], p["status"], p["verdict"], p["detail"]) for p in found.get("evidence", [])]
        rows += [(f"learned: {e['what']} -> {e['mode']}", "", "", e["evidence"]) for e in found.get("learned", [])]
        table = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>", rows)
        return format_html("{}<table>{}</table>", summary, table)

    @admin.action(description="Test endpoint (probe its modes and context window)", permissions=["change"])
    def test_endpoint(self, request, queryset):
        for profile in queryset:
            endpoint_check_run.delay(profile.pk)
        names = ", ".join(p.name for p in queryset)
        self.message_user(
            request,
            f"Testing {names} in the background: the findings appear under Capabilities when the probe is done "
            "(a few tiny requests; reload the profile's page).",
            messages.SUCCESS,
        )

    fieldsets = (
        (None, {"fields": ("name", "base_url", "model", "is_default", "follows_environment")}),
        (
            "Credentials",
            {
                "fields": ("api_key_env",),
                "description": "The name of the environment variable that holds the API key on the web and "
                "worker machines. To store a key (encrypted) instead, use the LLM endpoints page (/llm/endpoints/).",
            },
        ),
        ("Generation", {"fields": ("temperature", "max_tokens", "stage_max_tokens", "timeout_seconds")}),
        (
            "Limits",
            {
                "fields": ("max_concurrency", "requests_per_minute", "tokens_per_minute"),
                "description": "Held across every worker process and machine (through Redis, when the broker is "
                "Redis); they stay with the profile when it is renamed.",
            },
        ),
        (
            "Compatibility",
            {
                "fields": (
                    "structured_mode",
                    "tool_mode",
                    "context_window",
                    "capabilities_found",
                    "chars_per_token",
                    "tokens_per_second",
                )
            },
        ),
        ("Cost and cache", {"fields": ("price_input_per_mtok", "price_output_per_mtok", "cache_enabled")}),
    )


@admin.register(StageRoute)
class StageRouteAdmin(admin.ModelAdmin):
    list_display = ("stage", "profile")


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = (
        "id",
        "stage",
        "model",
        "job",
        "error_kind",
        "tokens_in",
        "tokens_out",
        "latency_ms",
        "cache_hit",
        "was_trimmed",
    )
    list_filter = ("stage", "error_kind", "cache_hit")
    list_select_related = ("job",)
    readonly_fields = [f.name for f in LLMCall._meta.fields]

    @admin.display(boolean=True, description="trimmed")
    def was_trimmed(self, obj):
        return bool(obj.trimmed)

    def has_add_permission(self, request):  # calls are a record of what happened
        return False
