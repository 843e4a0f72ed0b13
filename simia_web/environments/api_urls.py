from django.urls import path

from . import api

urlpatterns = [
    path("envs/", api.EnvCreateApi.as_view(), name="env-create"),
    path("envs/<uuid:session_id>", api.EnvDetailApi.as_view(), name="env-detail"),
    path("envs/<uuid:session_id>/step", api.EnvStepApi.as_view(), name="env-step"),
]
