from django.contrib import admin

from .models import EndpointProfile, LLMCall, StageRoute


@admin.register(EndpointProfile)
class EndpointProfileAdmin(admin.ModelAdmin):
    list_display = ("name", "model", "base_url", "structured_mode", "tool_mode", "max_concurrency", "is_default")


@admin.register(StageRoute)
class StageRouteAdmin(admin.ModelAdmin):
    list_display = ("stage", "profile")


@admin.register(LLMCall)
class LLMCallAdmin(admin.ModelAdmin):
    list_display = ("id", "stage", "model", "job", "error_kind", "tokens_in", "tokens_out", "latency_ms", "cache_hit")
    list_filter = ("stage", "error_kind", "cache_hit")
    readonly_fields = [f.name for f in LLMCall._meta.fields]
