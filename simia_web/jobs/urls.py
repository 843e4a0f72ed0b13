from django.urls import path

from . import views

urlpatterns = [
    path("jobs/", views.job_list, name="job-list"),
    path("jobs/<int:pk>/", views.job_detail, name="job-detail"),
    path("jobs/<int:pk>/progress/", views.job_progress, name="job-progress"),
    path("jobs/<int:pk>/cancel/", views.job_cancel_view, name="job-cancel"),
    path("jobs/<int:pk>/retry/", views.job_retry_view, name="job-retry"),
    # Each kind that takes parameters has a queue page at its slug (/queue/synthesis/, /queue/rollouts/, ...).
    path("queue/<slug:slug>/", views.job_queue_page, name="job-queue"),
]
