from django.urls import path

from . import api

urlpatterns = [
    path("me/", api.MeApi.as_view(), name="api-me"),
    path("workspaces/", api.WorkspaceListApi.as_view(), name="api-workspaces"),
    path("workspaces/<slug:slug>/members/", api.WorkspaceMembersApi.as_view(), name="api-workspace-members"),
]
