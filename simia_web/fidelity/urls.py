from django.urls import path

from . import views

urlpatterns = [
    path("fidelity/", views.run_list, name="fidelity-runs"),
    path("fidelity/<int:pk>/", views.run_detail, name="fidelity-run"),
]
