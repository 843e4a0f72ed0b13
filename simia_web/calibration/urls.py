from django.urls import path

from . import views

urlpatterns = [
    path("calibration/", views.calibration_page, name="calibration"),
    path("calibration/runs/<int:pk>/", views.calibration_page, name="calibration-run"),
    path("calibration/agreement/", views.agreement_panel, name="calibration-agreement"),
    path("calibration/assigned/", views.assigned, name="calibration-assigned"),
    path("calibration/assignments/", views.assignments, name="calibration-assignments"),
    path("trajectories/<int:pk>/rating/", views.rating_panel, name="trajectory-rating"),
]
