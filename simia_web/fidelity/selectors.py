"""Reads of fidelity runs for their pages and the API: each a bounded number of queries."""

from collections.abc import Iterable

from django.db.models import F, QuerySet, Window
from django.db.models.functions import RowNumber

from simia_web.accounts.scoping import scoped
from simia_web.catalog.models import Domain
from simia_web.curation.models import Trajectory

from .models import FidelityCall, FidelityRun, FidelityTrajectory, Outcome

EXAMPLES_PER_API = 3


def replayable_trajectories(domain: Domain) -> QuerySet[Trajectory]:
    """The domain's trajectories with tool calls that a simulator answered (not those run against the reference
    itself), oldest first."""
    return (
        Trajectory.objects.filter(domain=domain, tool_call_count__gt=0)
        # has_key too: a missing key compares as NULL, and NOT NULL would drop every simulated trajectory.
        .exclude(provenance__has_key="environment", provenance__environment="reference")
        .order_by("id")
    )


def runs_in(*, workspace_ids: Iterable[int]) -> QuerySet[FidelityRun]:
    """The runs of the workspaces' domains; another workspace's run is not there to be found."""
    return scoped(FidelityRun.objects.all(), workspace_ids)


def run_list(*, workspace_ids: Iterable[int], domain_name: str = "") -> QuerySet[FidelityRun]:
    """The workspaces' runs (of the domain `domain_name` only, when given), newest first."""
    runs = runs_in(workspace_ids=workspace_ids).select_related("domain", "job", "created_by")
    runs = runs.defer("domain__initial_state")
    return runs.filter(domain__name=domain_name) if domain_name else runs


def run_detail(*, workspace_ids: Iterable[int]) -> QuerySet[FidelityRun]:
    """The workspaces' runs as a run's page shows them, with their domain and job."""
    return runs_in(workspace_ids=workspace_ids).select_related("domain", "job").defer("domain__initial_state")


def run_trajectories(run: FidelityRun) -> QuerySet[FidelityTrajectory]:
    return run.trajectories.select_related("trajectory").only(
        "id",
        "run_id",
        "trajectory_id",
        "trajectory_version",
        "counts",
        "calls",
        "skipped",
        "score",
        "error",
        "trajectory__id",
        "trajectory__preview",
        "trajectory__status",
    )


def run_examples(run: FidelityRun, *, api: str | None = None, outcome: str | None = None) -> list[FidelityCall]:
    """Up to EXAMPLES_PER_API calls per API that did not come out equal (or of `outcome`), in one query."""
    calls = FidelityCall.objects.filter(run=run)
    calls = calls.filter(outcome=outcome) if outcome else calls.exclude(outcome=Outcome.EQUAL)
    if api:
        calls = calls.filter(api=api)
    numbered = calls.annotate(n=Window(RowNumber(), partition_by=[F("api")], order_by=[F("id").asc()]))
    return list(numbered.filter(n__lte=EXAMPLES_PER_API).select_related("result").order_by("api", "id"))
