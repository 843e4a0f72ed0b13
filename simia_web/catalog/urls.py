from django.urls import path

from . import guideline_views, reference_views, views

urlpatterns = [
    path("domains/", views.domain_list, name="domain-list"),
    path("domains/new/", views.domain_create, name="domain-new"),
    path("domains/<slug:name>/", views.domain_detail, name="domain-detail"),
    path("domains/<slug:name>/guidelines/", guideline_views.domain_guidelines, name="domain-guidelines"),
    path("guidelines/", guideline_views.workspace_guidelines, name="workspace-guidelines"),
    path("domains/<slug:name>/reference/", reference_views.domain_reference, name="domain-reference"),
    path("apis/", views.api_list, name="api-list"),
    path("apis/new/", views.api_create, name="api-new"),
    path("apis/import/", reference_views.api_import, name="api-import"),
    path("apis/<int:pk>/", views.api_detail, name="api-detail"),
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/new/", views.task_create, name="task-new"),
    path("tasks/<int:pk>/", views.task_detail, name="task-detail"),
    path("seeds/", views.seed_list, name="seed-list"),
    path("seeds/upload/", views.seed_upload, name="seed-upload"),
    path("seeds/<int:pk>/", views.seed_detail, name="seed-detail"),
]
