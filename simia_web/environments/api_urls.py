from django.urls import path

from . import api

urlpatterns = [
    path("envs/", api.EnvListCreateApi.as_view(), name="env-list"),
    path("envs/<uuid:session_id>", api.EnvDetailApi.as_view(), name="env-detail"),
    path("envs/<uuid:session_id>/step", api.EnvStepApi.as_view(), name="env-step"),
    path("envs/<uuid:session_id>/abandon", api.EnvAbandonApi.as_view(), name="env-abandon"),
]
