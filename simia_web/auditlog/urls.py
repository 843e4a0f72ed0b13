from django.urls import path

from . import views

urlpatterns = [path("audit-log/", views.audit_log, name="audit-log")]
