from django.urls import path

from . import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("review/", views.review_queue, name="review-queue"),
    path("review/bulk/", views.review_bulk, name="review-bulk"),
    path("trajectories/<int:pk>/", views.trajectory_page, name="trajectory"),
    path("trajectories/<int:pk>/decide/", views.trajectory_decide, name="trajectory-decide"),
    path("agreement/", views.agreement_page, name="agreement"),
]
