from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from simia_web.core.services import audit_record

from .models import User


@admin.register(User)
class SimiaUserAdmin(UserAdmin):
    list_display = ("username", "role", "email", "is_active", "last_login")
    list_filter = ("role", "is_active")
    # The staff and superuser flags follow the role (accounts.models.User): shown, never edited.
    fieldsets = (
        (None, {"fields": ("username", "password")}),
        ("Personal info", {"fields": ("first_name", "last_name", "email")}),
        ("Role", {"fields": ("role", "is_active", "is_staff", "is_superuser")}),
        ("Important dates", {"fields": ("last_login", "date_joined")}),
    )
    add_fieldsets = UserAdmin.add_fieldsets + (("Role", {"fields": ("role",)}),)
    readonly_fields = ("is_staff", "is_superuser")

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        if "role" in form.changed_data:
            before = form.initial.get("role", "") if change else ""
            audit_record(actor=request.user, action="user.role", target=obj, data={"from": before, "to": obj.role})
