from django.urls import path

from . import duplicate_views, views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("review/", views.review_queue, name="review-queue"),
    path("review/next/", views.review_next, name="review-next"),
    path("review/bulk/", views.review_bulk, name="review-bulk"),
    path("review/bulk/undo/", views.review_bulk_undo, name="review-bulk-undo"),
    path("reviews/<int:pk>/undo/", views.review_undo_view, name="review-undo"),
    path("review/duplicates/", duplicate_views.clusters_list, name="near-duplicate-clusters"),
    path("review/duplicates/<int:head>/", duplicate_views.cluster_page, name="near-duplicate-cluster"),
    path("review/duplicates/<int:head>/keep/", duplicate_views.cluster_keep, name="near-duplicate-keep"),
    path("trajectories/<int:pk>/", views.trajectory_page, name="trajectory"),
    path("trajectories/<int:pk>/decide/", views.trajectory_decide, name="trajectory-decide"),
    path("trajectories/<int:pk>/reservation/", views.trajectory_reservation, name="trajectory-reservation"),
    path("trajectories/<int:pk>/edit/", views.trajectory_editor, name="trajectory-edit"),
    path("trajectories/<int:pk>/draft/", views.trajectory_draft, name="trajectory-draft"),
    path("trajectories/<int:pk>/check-call/", views.trajectory_check_call, name="trajectory-check-call"),
    path("trajectories/<int:pk>/judge/", views.trajectory_judge_again_view, name="trajectory-judge"),
    path("trajectories/<int:pk>/revert/", views.trajectory_revert_view, name="trajectory-revert"),
    path("agreement/", views.agreement_page, name="agreement"),
]
