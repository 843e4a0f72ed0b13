"""The Django admin's pages for users, workspaces and memberships (site administrators only)."""

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from simia_web.core.services import audit_record

from .models import Membership, User, Workspace
from .services import membership_set, workspace_default


@admin.register(User)
class SimiaUserAdmin(UserAdmin):
    list_display = ("username", "role", "current_workspace", "is_site_admin", "email", "is_active", "last_login")
    list_filter = ("role", "is_site_admin", "is_active")
    # The staff and superuser flags follow the site administrator flag (accounts.models.User): shown, never edited.
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        ("Role", {"fields": ("role", "current_workspace", "is_site_admin", "is_active", "is_staff", "is_superuser")}),
        ("Important dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = UserAdmin.add_fieldsets + (("Role", {"fields": ("role",)}),)
    readonly_fields = ("is_staff", "is_superuser")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if "role" in form.changed_data:
            before = form.initial.get("role", "") if change else ""
            audit_record(actor=request.user, action="user.role", target=obj, data={"from": before, "to": obj.role})
        if obj.role and ({"role", "current_workspace"} & set(form.changed_data)):
            # The role is the role in the current workspace: the membership follows it.
            workspace = obj.current_workspace or workspace_default()
            membership_set(workspace=workspace, user=obj, role=obj.role, actor=request.user)


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ("slug", "name", "created_at")
    search_fields = ("slug", "name")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ("workspace", "user", "role", "created_at")
    list_filter = ("role", "workspace")
    raw_id_fields = ("user",)
