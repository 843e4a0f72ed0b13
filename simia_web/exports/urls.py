from django.urls import path

from . import views

urlpatterns = [path("exports/", views.export_list, name="export-list")]
