from django.urls import path

from .views import agreement, bulk, dashboard, duplicates, editor, gold, queue, second_look, trajectory

urlpatterns = [
    path("", dashboard.dashboard, name="dashboard"),
    path("review/", queue.review_queue, name="review-queue"),
    path("review/next/", queue.review_next, name="review-next"),
    path("review/bulk/", bulk.review_bulk, name="review-bulk"),
    path("review/bulk/undo/", bulk.review_bulk_undo, name="review-bulk-undo"),
    path("review/second-look/", second_look.reviewer_queue, name="reviewer-queue"),
    path("review/second-look/confirm-rest/", second_look.confirm_rest, name="reviewer-confirm-rest"),
    path("review/overturned/", second_look.overturned_list, name="overturned-decisions"),
    path("review/annotators/<int:pk>/", gold.annotator_quality_page, name="annotator-quality"),
    path("trajectories/<int:pk>/gold/", gold.trajectory_gold, name="trajectory-gold"),
    path("reviews/<int:pk>/undo/", trajectory.review_undo_view, name="review-undo"),
    path("review/duplicates/", duplicates.clusters_list, name="near-duplicate-clusters"),
    path("review/duplicates/<int:head>/", duplicates.cluster_page, name="near-duplicate-cluster"),
    path("review/duplicates/<int:head>/keep/", duplicates.cluster_keep, name="near-duplicate-keep"),
    path("trajectories/<int:pk>/", trajectory.trajectory_page, name="trajectory"),
    path("trajectories/<int:pk>/decide/", trajectory.trajectory_decide, name="trajectory-decide"),
    path("trajectories/<int:pk>/reservation/", trajectory.trajectory_reservation, name="trajectory-reservation"),
    path("trajectories/<int:pk>/edit/", editor.trajectory_editor, name="trajectory-edit"),
    path("trajectories/<int:pk>/draft/", editor.trajectory_draft, name="trajectory-draft"),
    path("trajectories/<int:pk>/check-call/", editor.trajectory_check_call, name="trajectory-check-call"),
    path("trajectories/<int:pk>/judge/", trajectory.trajectory_judge_again_view, name="trajectory-judge"),
    path("trajectories/<int:pk>/revert/", trajectory.trajectory_revert_view, name="trajectory-revert"),
    path("agreement/", agreement.agreement_page, name="agreement"),
]
