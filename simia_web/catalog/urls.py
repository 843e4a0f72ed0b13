from django.urls import path

from . import reference_views, views

urlpatterns = [
    path("domains/", views.domain_list, name="domain-list"),
    path("domains/<slug:name>/", views.domain_detail, name="domain-detail"),
    path("domains/<slug:name>/reference/", reference_views.domain_reference, name="domain-reference"),
    path("apis/", views.api_list, name="api-list"),
    path("apis/import/", reference_views.api_import, name="api-import"),
    path("apis/<int:pk>/", views.api_detail, name="api-detail"),
    path("tasks/", views.task_list, name="task-list"),
    path("tasks/<int:pk>/", views.task_detail, name="task-detail"),
    path("seeds/", views.seed_list, name="seed-list"),
    path("seeds/upload/", views.seed_upload, name="seed-upload"),
    path("seeds/<int:pk>/", views.seed_detail, name="seed-detail"),
    # Every kind with a form has a queue page; the first three keep the addresses they were published at.
    path("queue/synthesis/", views.queue_job, {"kind": "synthesize"}, name="queue-synthesis"),
    path("queue/rollouts/", views.queue_job, {"kind": "rollout"}, name="queue-rollouts"),
    path("queue/amplify/", views.queue_job, {"kind": "amplify"}, name="queue-amplify"),
    path("queue/<slug:kind>/", views.queue_job, name="queue-job"),
]
