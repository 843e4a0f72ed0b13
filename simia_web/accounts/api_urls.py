from django.urls import path

from . import api

urlpatterns = [
    path("me/", api.MeApi.as_view(), name="api-me"),
    path("workspaces/", api.WorkspaceListApi.as_view(), name="api-workspaces"),
    # Any segment: a slug that cannot exist is the API's own 404 (JSON), not the site's page.
    path("workspaces/<str:slug>/members/", api.WorkspaceMembersApi.as_view(), name="api-workspace-members"),
]
