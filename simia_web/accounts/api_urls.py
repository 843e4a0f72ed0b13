from django.urls import path

from . import api

urlpatterns = [path("me/", api.MeApi.as_view(), name="api-me")]
