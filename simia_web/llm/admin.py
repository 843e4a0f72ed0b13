from django.contrib import admin

from .models import EndpointProfile, LLMCall, StageRoute


@admin.register(EndpointProfile)
class EndpointProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "base_url", "structured_mode", "tool_mode", "max_concurrency", "is_default")
    search_fields = ("name", "model", "base_url")

    def get_readonly_fields(self, request, obj=None):
        # Each machine takes these from its environment while the profile follows it (see the help text).
        return ("base_url", "model", "api_key_env") if obj is not None and obj.follows_environment else ()

    fieldsets = (
        (None, {"fields": ("name", "base_url", "model", "is_default", "follows_environment")}),
        (
            "Credentials",
            {
                "fields": ("api_key_env",),
                "description": "The name of the environment variable that holds the API key on the web and "
                "worker machines. The key itself is never stored.",
            },
        ),
        ("Generation", {"fields": ("temperature", "max_tokens", "timeout_seconds", "max_concurrency")}),
        ("Compatibility", {"fields": ("structured_mode", "tool_mode")}),
        ("Cost and cache", {"fields": ("price_input_per_mtok", "price_output_per_mtok", "cache_enabled")}),
    )


@admin.register(StageRoute)
class StageRouteAdmin(admin.ModelAdmin):
    list_display = ("stage", "profile")


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = ("id", "stage", "model", "job", "error_kind", "tokens_in", "tokens_out", "latency_ms", "cache_hit")
    list_filter = ("stage", "error_kind", "cache_hit")
    list_select_related = ("job",)
    readonly_fields = [f.name for f in LLMCall._meta.fields]

    def has_add_permission(self, request):  # calls are a record of what happened
        return False
