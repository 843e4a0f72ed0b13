from django.urls import path

from . import views

urlpatterns = [
    path("audits/", views.audit_list, name="audit-list"),
    path("audits/<int:pk>/", views.audit_detail, name="audit-detail"),
    path("audits/<int:pk>/next/", views.audit_next, name="audit-next"),
    path("audits/<int:pk>/accept-rest/", views.audit_accept_rest_view, name="audit-accept-rest"),
    path("audits/<int:pk>/blind/", views.audit_blind, name="audit-blind"),
    path("audits/<int:pk>/items/<int:trajectory_id>/", views.audit_item, name="audit-item"),
    path("audits/<int:pk>/items/<int:trajectory_id>/decide/", views.audit_item_decide, name="audit-item-decide"),
    path("audits/<int:pk>/items/<int:trajectory_id>/release/", views.audit_item_release, name="audit-item-release"),
    path("audits/<int:pk>/reviews/<int:review_id>/undo/", views.audit_undo, name="audit-undo"),
]
