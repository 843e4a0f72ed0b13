from django.urls import path

from . import views

urlpatterns = [
    path("llm/calls/<int:pk>/", views.call_detail, name="llm-call"),
]
