"""Workspace scoping: which workspaces a request may see, and any team-owned queryset cut down to them.

Every model that holds a team's data names the path from itself to its owner workspace in `workspace_path`
(`"workspace"`, `"domain__workspace"`, `"trajectory__domain__workspace"`, ...). Reads start from `scoped()`, so a
selector names the workspaces it reads from rather than remembering a filter; `tests/accounts/test_ownership.py`
holds every model to having a path, or to being listed in `DEPLOYMENT_WIDE` with the reason.

Pages work in the user's current workspace (the switcher in the header chooses it). The REST API reads from every
workspace the caller belongs to, or from the one `?workspace=SLUG` names.
"""

from collections.abc import Iterable
from typing import Any

from django.apps import apps
from django.core.validators import slug_re
from django.db.models import BooleanField, F, Func, Model, QuerySet, Subquery

from simia_web.core.errors import Forbidden, NotFound, ValidationFailed

from .models import DEFAULT_WORKSPACE, ROLE_RANK, Membership, Workspace, default_workspace_id

# The path of a row that keeps its domain's id in a plain column rather than a foreign key (a trigger's table).
DOMAIN_ID_COLUMN = "domain_id"

# Models that belong to the deployment rather than to a team, by label, with the reason.
DEPLOYMENT_WIDE: dict[str, str] = {
    "accounts.user": "a person may belong to several workspaces; memberships say where",
    "accounts.workspace": "the workspaces themselves",
    "core.revision": "a revision belongs to the workspace of the object it versions (its target)",
    "jobs.watchdogturn": "the watchdog's turn-taking between workers, no team's data",
    "llm.endpointprofile": "the deployment's LLM endpoints, set up by its administrators for every team",
    "llm.stageroute": "which endpoint serves which stage, deployment-wide like the endpoints",
    "operations.metriccount": "operator counters behind /metrics, whose labels carry no workspace content",
    "calibration.ratingsrevision": "one counter that orders rating writes, holding no data",
    "calibration.keptfigures": "a cache of computed figures keyed by what they were computed from, scope included",
}


def workspace_path(model: type[Model]) -> str | None:
    """The lookup path from `model` to its owner workspace, or None for a deployment-wide model."""
    return getattr(model, "workspace_path", None)


class AmongListed(Func):
    """`column = ANY(ARRAY(subquery))` on PostgreSQL (`column IN (subquery)` elsewhere): the subquery runs once,
    before the scan, as a list the rows are filtered by. As `IN (subquery)` PostgreSQL would plan a join of the
    domains and the trajectories from its guess of how few rows one workspace's domains hold, and sort every
    match of a queue before taking its first page; filtered by a list, the queue's ordered indexes are read in
    order and stop at the page's end."""

    output_field = BooleanField()
    conditional = True

    def as_sql(self, compiler, connection, **extra_context):  # type: ignore[override]
        (column, column_params), (subquery, subquery_params) = map(compiler.compile, self.get_source_expressions())
        among = f"= ANY(ARRAY{subquery})" if connection.vendor == "postgresql" else f"IN {subquery}"
        return f"{column} {among}", [*column_params, *subquery_params]


def scoped(queryset: QuerySet[Any], workspace_ids: Iterable[int], *, domain_column: str | None = None) -> QuerySet[Any]:
    """`queryset` cut to the rows owned by the workspaces `workspace_ids`. A row owned through its domain is
    filtered by its domain column among the workspaces' domains, without joining the domains. `domain_column` names
    a column of the row's own that holds its owner's domain, where the caller knows every row read carries it (a
    copy that spares a join to the owner)."""
    path = workspace_path(queryset.model)
    if path is None:
        raise TypeError(f"{queryset.model._meta.label} has no owner workspace to scope by.")
    # The domain column of a row owned through its domain: `domain_id` itself, or `..._domain_id` of the path.
    column = domain_column or (
        DOMAIN_ID_COLUMN if path == DOMAIN_ID_COLUMN else path.removesuffix("__workspace") + "_id"
    )
    if column == DOMAIN_ID_COLUMN or column.endswith(f"__{DOMAIN_ID_COLUMN}"):
        domains = apps.get_model("catalog", "Domain")._default_manager.filter(workspace_id__in=list(workspace_ids))
        return queryset.filter(AmongListed(F(column), Subquery(domains.values("pk"))))
    return queryset.filter(**{f"{path}__in": list(workspace_ids)})


def member_workspace_ids(user) -> list[int]:
    """Every workspace `user` may read: theirs, or every one for a site administrator."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return []
    if user.is_site_admin:
        return list(Workspace.objects.values_list("pk", flat=True))
    return list(Membership.objects.filter(user=user).values_list("workspace_id", flat=True))


def page_workspace_ids(user) -> list[int]:
    """The workspace a page works in: the user's current one (none for a user who belongs nowhere)."""
    if not getattr(user, "is_authenticated", False) or user.current_workspace_id is None:
        return []
    return [user.current_workspace_id]


def api_workspace_ids(user, slug: str | None = None) -> list[int]:
    """What a REST read sees: every workspace the caller belongs to, or the one `slug` names (one of theirs)."""
    ids = member_workspace_ids(user)
    if not slug:
        return ids
    return [member_workspace(slug, ids).pk]


def member_workspace(slug: str, member_ids: list[int]) -> Workspace:
    """The workspace `slug` names among `member_ids`; a slug no workspace could have (text that is not a slug, a NUL
    byte PostgreSQL would refuse) is refused before any query, like a slug of nobody's."""
    workspace = None
    if slug_re.fullmatch(slug):
        workspace = Workspace.objects.filter(slug=slug, pk__in=member_ids).first()
    if workspace is None:
        raise ValidationFailed(f"You belong to no workspace {slug!r}.", field="workspace")
    return workspace


def role_in(user, workspace_id: int) -> str | None:
    """`user`'s role in the workspace `workspace_id` (admin for a site administrator), None for a non-member."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    if user.is_site_admin:
        return "admin"
    if workspace_id == user.current_workspace_id:
        return user.role or None
    return Membership.objects.filter(user=user, workspace_id=workspace_id).values_list("role", flat=True).first()


def has_role_in(user, workspace_id: int, role: str) -> bool:
    held = role_in(user, workspace_id)
    return held is not None and ROLE_RANK.get(held, 0) >= ROLE_RANK[role]


def owned_or_404(queryset: QuerySet[Any], workspace_ids: Iterable[int], **lookup) -> Any:
    """The one row `lookup` finds among those the workspaces own; another workspace's row is not found, as is a
    missing one, so nobody learns it exists."""
    row = scoped(queryset, workspace_ids).filter(**lookup).first()
    if row is None:
        raise NotFound(f"No {queryset.model._meta.verbose_name} matches.")
    return row


def role_require_in(user, workspace_id: int, role: str) -> None:
    """Refuse a write in the workspace `workspace_id`: not found for a non-member (nobody learns what another
    workspace holds), forbidden for a member whose role there ranks below `role`."""
    held = role_in(user, workspace_id)
    if held is None:
        raise NotFound("Not found.")
    if ROLE_RANK.get(held, 0) < ROLE_RANK[role]:
        raise Forbidden(f"This needs the {role} role in this workspace.")


def workspace_for_write(user, slug: str | None = None, *, role: str) -> Workspace:
    """The workspace a new object goes to: the one `slug` names, else the caller's only workspace; a caller in
    several must name one. The caller needs `role` there."""
    ids = member_workspace_ids(user)
    if slug:
        workspace = member_workspace(slug, ids)
    elif len(ids) == 1:
        workspace = Workspace.objects.get(pk=ids[0])
    elif ids:
        raise ValidationFailed("You belong to several workspaces: name one (workspace=SLUG).", field="workspace")
    else:
        raise NotFound("You belong to no workspace.")
    role_require_in(user, workspace.pk, role)
    return workspace


def page_workspace(user) -> Workspace | None:
    """The workspace a page creates in: the user's current one."""
    return user.current_workspace if getattr(user, "is_authenticated", False) else None


def command_workspace(slug: str | None) -> Workspace:
    """The workspace a management command works in: the one `--workspace` names, `default` otherwise (made if it
    is missing, as anything made without a workspace goes there)."""
    if not slug or slug == DEFAULT_WORKSPACE:
        return Workspace.objects.get(pk=default_workspace_id())
    workspace = Workspace.objects.filter(slug=slug).first()
    if workspace is None:
        raise ValidationFailed(f"No workspace {slug!r}.", field="workspace")
    return workspace
