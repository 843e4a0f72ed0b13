"""Fidelity runs: queueing one, measuring a trajectory, and the run's totals.

A run is queued as a job of the `fidelity` kind (fidelity.job_kinds): one unit per trajectory, then one that
adds up the run. The reference is copied onto the run when it is queued, so changing the domain's reference
later does not change a run under way."""

from collections import Counter, defaultdict

from django.db import transaction
from django.db.models import Count
from django.utils import timezone

from simia_web.accounts.models import default_workspace_id
from simia_web.catalog.models import Domain
from simia_web.catalog.references import ReferenceConfig, reference_for
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Trajectory
from simia_web.jobs.models import Job
from simia_web.jobs.services import job_create

from .compare import METHOD, METHOD_STATEMENT
from .models import FidelityCall, FidelityRun, FidelityTrajectory, Outcome
from .replay import trajectory_replay
from .selectors import replayable_trajectories

FIDELITY = "fidelity"
MATCHING = (Outcome.EQUAL, Outcome.EQUIVALENT)
COMPARED = (Outcome.EQUAL, Outcome.EQUIVALENT, Outcome.DIFFERENT)


def fidelity_job_create(*, domain: str, limit: int | None = None, workspace_id: int | None = None, actor=None) -> Job:
    """Queue a fidelity run of the domain `domain` of the workspace `workspace_id` (the `default` one when None);
    another workspace's domain is refused as a missing one."""
    workspace_id = default_workspace_id() if workspace_id is None else workspace_id
    found = Domain.objects.filter(name=domain, workspace_id=workspace_id).first()
    if found is None:
        raise ValidationFailed(f"no domain named {domain!r}", field="domain")
    config = reference_for(found)
    if config is None:
        raise ValidationFailed(
            f"{domain} has no reference environment: name one on its page, over the API or with fidelity",
            field="domain",
        )
    if not replayable_trajectories(found).exists():
        raise ValidationFailed(f"{domain} has no trajectory with a simulated tool call to replay", field="domain")
    with transaction.atomic():
        run = FidelityRun.objects.create(
            domain=found,
            reference=config.as_dict(),
            method=METHOD,
            limit=limit,
            created_by=actor if getattr(actor, "pk", None) else None,
        )
        params = {"domain": domain, "limit": limit, "run": run.pk}
        job = job_create(kind=FIDELITY, params=params, actor=actor, workspace_id=workspace_id)
        run.job = job
        run.save(update_fields=["job"])
    return job


def score_of(counts: dict) -> float | None:
    """The share of compared calls whose simulated response matched (equal or equivalent); reference errors
    are not compared. None when nothing was."""
    compared = sum(counts.get(outcome, 0) for outcome in COMPARED)
    return sum(counts.get(outcome, 0) for outcome in MATCHING) / compared if compared else None


def trajectory_measure(*, run: FidelityRun, trajectory_id: int):
    """Replay one trajectory (the slow part, no transaction held) and return the function that writes it."""
    trajectory = Trajectory.objects.only("messages", "steps", "version").get(pk=trajectory_id)
    replay = trajectory_replay(
        config=ReferenceConfig(**run.reference), messages=trajectory.messages, steps=trajectory.steps
    )

    def write() -> dict:
        counts = dict(Counter(call.outcome for call in replay.calls))
        score = score_of(counts)
        FidelityTrajectory.objects.filter(trajectory_id=trajectory_id, latest=True).update(latest=False)
        result = FidelityTrajectory.objects.create(
            run=run,
            trajectory_id=trajectory_id,
            trajectory_version=trajectory.version,
            counts=counts,
            calls=len(replay.calls),
            skipped=replay.skipped,
            score=score,
            error=replay.error,
        )
        FidelityCall.objects.bulk_create(
            [FidelityCall(run=run, result=result, **call.as_fields()) for call in replay.calls], batch_size=500
        )
        Trajectory.objects.filter(pk=trajectory_id).update(fidelity=score)
        written = {"trajectory": trajectory_id, "calls": len(replay.calls), **counts}
        return {**written, "error": replay.error} if replay.error else written

    return write


def run_summarize(*, run: FidelityRun) -> dict:
    """The run's totals, per outcome and per API, and its trajectories' (its own rows only)."""
    per_api: dict[str, Counter] = defaultdict(Counter)
    rows = FidelityCall.objects.filter(run=run).values_list("api", "outcome").annotate(n=Count("id")).order_by()
    for api, outcome, n in rows:
        per_api[api][outcome] += n
    totals = sum(per_api.values(), Counter())
    results = FidelityTrajectory.objects.filter(run=run)
    scores = [score for score in results.values_list("score", flat=True) if score is not None]
    summary = {
        "run": run.pk,
        "domain": run.domain.name,
        "reference": ReferenceConfig(**run.reference).describe(),
        "method": METHOD_STATEMENT,
        "calls": {outcome: totals.get(outcome, 0) for outcome in Outcome.values},
        "fidelity": score_of(totals),
        "apis": {
            api: {
                "calls": sum(counts.values()),
                **{outcome: counts.get(outcome, 0) for outcome in Outcome.values},
                "fidelity": score_of(counts),
            }
            for api, counts in sorted(per_api.items())
        },
        "trajectories": {
            "measured": results.count(),
            "sessions_failed": results.exclude(error="").count(),
            "mean_fidelity": sum(scores) / len(scores) if scores else None,
            "skipped_calls": sum(results.values_list("skipped", flat=True)),
        },
    }
    run.summary = summary
    run.finished_at = timezone.now()
    run.save(update_fields=["summary", "finished_at"])
    return summary
