"""What every REST view of a team's data shares about workspaces: the `workspace` query parameter of the lists,
documented once, and the workspaces a request reads from."""

from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import serializers

from simia_web.core.rest import SelectorListMixin

from .scoping import api_workspace_ids

WORKSPACE_PARAMETER = OpenApiParameter(
    "workspace",
    str,
    description="A workspace's slug (one of yours): only its rows. Without it, the rows of every workspace you "
    "belong to.",
)


def workspace_write_field() -> serializers.SlugField:
    """The `workspace` field of a REST write that makes something: where it goes."""
    return serializers.SlugField(
        required=False,
        help_text="The workspace it goes to (its slug): required when you belong to more than one.",
    )


def request_workspace_ids(request) -> list[int]:
    """The workspaces a REST read sees: the caller's, or the one `?workspace=SLUG` names."""
    return api_workspace_ids(request.user, request.query_params.get("workspace"))


class WorkspaceScopedListMixin(SelectorListMixin):
    """A selector-answered list (core.rest.SelectorListMixin) whose selector also takes `workspace_ids`: the rows of
    the request's workspaces, with `?workspace=` documented."""

    def list_scope(self) -> dict:
        return {"workspace_ids": request_workspace_ids(self.request)}

    @extend_schema(parameters=[WORKSPACE_PARAMETER])
    def list(self, request, *args, **kwargs):
        return super().list(request, *args, **kwargs)
