from django.contrib import admin

from .models import EnvGroup, EnvSession


@admin.register(EnvSession)
class EnvSessionAdmin(admin.ModelAdmin):
    list_display = ("id", "domain", "task", "group", "step_count", "done", "reward", "termination_reason", "created_by")
    list_filter = ("done", "termination_reason", "domain")
    list_select_related = ("domain", "task", "group", "created_by")
    readonly_fields = [f.name for f in EnvSession._meta.fields]


@admin.register(EnvGroup)
class EnvGroupAdmin(admin.ModelAdmin):
    list_display = ("key", "domain", "task", "created_by", "created_at")
    list_select_related = ("domain", "task", "created_by")
    readonly_fields = [f.name for f in EnvGroup._meta.fields]
