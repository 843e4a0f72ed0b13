from django.urls import path

from . import api

urlpatterns = [path("audit-log/", api.AuditLogApi.as_view(), name="api-audit-log")]
