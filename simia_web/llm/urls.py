from django.urls import path

from . import views

urlpatterns = [
    path("llm/calls/<int:pk>/", views.call_detail, name="llm-call"),
    path("llm/endpoints/", views.endpoint_list, name="llm-endpoints"),
    path("llm/endpoints/new/", views.endpoint_create, name="llm-endpoint-new"),
    path("llm/endpoints/<int:pk>/", views.endpoint_edit, name="llm-endpoint"),
    path("llm/endpoints/<int:pk>/test/", views.endpoint_test, name="llm-endpoint-test"),
    path("llm/endpoints/<int:pk>/probe/", views.endpoint_probe, name="llm-endpoint-probe"),
]
