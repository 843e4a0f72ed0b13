from django.urls import path

from . import views

urlpatterns = [
    path("exports/", views.export_list, name="export-list"),
    path("exports/<int:pk>/", views.export_detail, name="export-detail"),
]
