"""Writes of calibration: ratings of a text version, assignments of items to k annotators, calibration runs and
their answers."""

import random
from collections import Counter

from django.db import connection, transaction
from django.db.models import Count
from django.utils import timezone

from simia_web.accounts.models import Role, Workspace, default_workspace_id, owner_workspace_id
from simia_web.accounts.scoping import has_role_in, scoped
from simia_web.catalog.guidelines import guidelines_in_force
from simia_web.core.errors import Conflict, ValidationFailed
from simia_web.curation.models import GoldItem, Review, Trajectory
from simia_web.curation.services.consensus import consensus_open
from simia_web.jobs.models import Job
from simia_web.jobs.services import job_create
from simia_web.llm.models import EndpointProfile
from simia_web.simulation.judge import PROMPTS, grades_clean

from . import figures, selectors
from .models import (
    AssignmentBatch,
    CalibrationAnswer,
    CalibrationRun,
    ConsensusRule,
    CriterionRating,
    ErrorType,
    MessageLabel,
    RatingAssignment,
    RatingsRevision,
)

CALIBRATE = "calibrate"
# The disagreements a run keeps for its page, most criteria first.
DISAGREEMENTS_KEPT = 100
COMMENT_MAX = 4000


class RatingStale(Conflict):
    """Ratings of a text that has since changed: nothing was saved."""

    code = "stale_version"

    def __init__(self, trajectory: Trajectory, expected: int):
        self.trajectory = trajectory
        super().__init__(
            f"Trajectory {trajectory.pk}'s text is now version {trajectory.text_version}, not version {expected} "
            "which you rated; nothing was saved. Read it again and rate the new text."
        )

    def body(self) -> dict:
        return {"detail": self.detail, "code": self.code, "text_version": self.trajectory.text_version}


def _scores_clean(scores: dict) -> dict[str, float]:
    clean = grades_clean(scores)
    if not clean:
        raise ValidationFailed("rate at least one criterion", "scores")
    return clean


def _labels_clean(labels: dict, message_count: int) -> dict[int, dict]:
    clean = {}
    for key, label in labels.items():
        try:
            index = int(key)
        except (TypeError, ValueError):
            raise ValidationFailed(f"message {key!r}: a message index", "messages") from None
        if not 0 <= index < message_count:
            raise ValidationFailed(f"message {index}: the conversation has {message_count} messages", "messages")
        error_types = sorted(set(label.get("error_types") or []))
        if unknown := [e for e in error_types if e not in ErrorType.values]:
            raise ValidationFailed(f"message {index}: no error type {', '.join(map(str, unknown))}", "messages")
        comment = str(label.get("comment") or "").strip()
        if len(comment) > COMMENT_MAX:
            raise ValidationFailed(f"message {index}: a comment of at most {COMMENT_MAX} characters", "messages")
        if error_types or comment:
            clean[index] = {"error_types": error_types, "comment": comment}
    return clean


def rating_save(
    *,
    trajectory_id: int,
    annotator,
    text_version: int,
    scores: dict,
    comment: str = "",
    message_labels: dict | None = None,
) -> CriterionRating:
    """Save an annotator's ratings of the text version they read, replacing their earlier ratings of that version.

    Refused (RatingStale) when the text has changed since: a rating counts only for the text it was made on."""
    clean = _scores_clean(scores)
    if len(comment) > COMMENT_MAX:
        raise ValidationFailed(f"a comment of at most {COMMENT_MAX} characters", "comment")
    with transaction.atomic():
        trajectory = (
            Trajectory.objects.select_for_update()
            .only("id", "text_version", "messages", "domain_id")
            .get(pk=trajectory_id)
        )
        if trajectory.text_version != text_version:
            raise RatingStale(trajectory, text_version)
        labels = _labels_clean(message_labels or {}, len(trajectory.messages or []))
        rating, _ = CriterionRating.objects.update_or_create(
            trajectory=trajectory,
            annotator=annotator,
            trajectory_version=text_version,
            defaults={
                "scores": clean,
                "comment": comment.strip(),
                **guidelines_in_force(domain_id=trajectory.domain_id).stamp,
            },
        )
        rating.message_labels.all().delete()
        MessageLabel.objects.bulk_create(
            [MessageLabel(rating=rating, message_index=index, **label) for index, label in sorted(labels.items())]
        )
        _ratings_revision_advance()
    return rating


def _ratings_revision_advance() -> None:
    """Advance the ratings' revision in the caller's transaction, creating its row the first time: one upsert, so
    that two first writers still advance it twice (an update then an insert could both write 1)."""
    table = connection.ops.quote_name(RatingsRevision._meta.db_table)
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (id, number) VALUES (1, 1) ON CONFLICT (id) DO UPDATE SET number = {table}.number + 1"
        )


def assignments_create(
    *,
    trajectory_ids: list[int],
    annotators: list,
    overlap: int,
    actor,
    selection: dict,
    workspace: Workspace,
    consensus: str = ConsensusRule.NONE,
) -> dict:
    """Give each item of `workspace` to `overlap` of its annotators, those with the fewest items assigned there first
    (then by id), so the load stays even; an item already given to someone counts for them and is not given twice.
    Under a `consensus` rule the items are decided by their k annotators' votes (curation.services.consensus).
    Gold items of the workspace are mixed into each annotator's share at the workspace's gold rate, unmarked.
    Items of another workspace and people who are not annotators in this one are refused. Returns the counts."""
    annotators = sorted({a.pk: a for a in annotators}.values(), key=lambda a: a.pk)
    if consensus not in ConsensusRule.values:
        raise ValidationFailed(
            f"no consensus rule {consensus!r}; rules: {', '.join(ConsensusRule.values)}", "consensus"
        )
    if not 1 <= overlap <= len(annotators):
        raise ValidationFailed(f"k must be between 1 and the {len(annotators)} annotators chosen", "overlap")
    if refused := [a.username for a in annotators if not has_role_in(a, workspace.pk, Role.ANNOTATOR)]:
        raise ValidationFailed(f"not annotators in this workspace: {', '.join(refused)}", "annotators")
    if not trajectory_ids:
        raise ValidationFailed("no item matches", "selection")
    theirs = scoped(Trajectory.objects.filter(pk__in=trajectory_ids), [workspace.pk]).values_list("pk", flat=True)
    if missing := sorted(set(trajectory_ids) - set(theirs)):
        raise ValidationFailed(f"no trajectory with id {', '.join(map(str, missing[:20]))}", "trajectories")
    with transaction.atomic():
        load = Counter(
            dict(
                scoped(RatingAssignment.objects.filter(annotator__in=annotators), [workspace.pk])
                .values_list("annotator_id")
                .annotate(n=Count("id"))
                .order_by()
            )
        )
        held: dict[int, set[int]] = {}
        for item, annotator in RatingAssignment.objects.filter(trajectory_id__in=trajectory_ids).values_list(
            "trajectory_id", "annotator_id"
        ):
            held.setdefault(item, set()).add(annotator)
        batch = AssignmentBatch.objects.create(
            created_by=actor, overlap=overlap, selection=selection, workspace=workspace, consensus=consensus
        )
        rows = []
        for item in trajectory_ids:
            already = held.get(item, set())
            wanted = overlap - len(already & {a.pk for a in annotators})
            free = sorted((a for a in annotators if a.pk not in already), key=lambda a: (load[a.pk], a.pk))
            for annotator in free[: max(wanted, 0)]:
                rows.append(RatingAssignment(batch=batch, trajectory_id=item, annotator=annotator))
                held.setdefault(item, set()).add(annotator.pk)
                load[annotator.pk] += 1
        gold = _gold_mixed(batch, rows, workspace, exclude=set(trajectory_ids))
        RatingAssignment.objects.bulk_create(rows + gold, batch_size=1000)
        if consensus:
            voters = {item: sorted(people & {a.pk for a in annotators}) for item, people in held.items()}
            consensus_open(
                trajectory_ids=trajectory_ids, rule=consensus, overlap=overlap, voters=voters, batch=batch.pk
            )
    return {"batch": batch.pk, "items": len(trajectory_ids), "assignments": len(rows), "gold": len(gold)}


def _gold_mixed(batch: AssignmentBatch, rows: list[RatingAssignment], workspace: Workspace, exclude: set[int]) -> list:
    """Assignments of the workspace's gold items to each annotator of `rows`, at the workspace's gold rate of their
    share (rounded at random, so that small shares get gold at that rate on average): items they hold or have
    answered are left out, and the rest are drawn at random."""
    share = Counter(row.annotator.pk for row in rows)
    if not share or not workspace.gold_rate:
        return []
    gold = scoped(GoldItem.objects.exclude(trajectory_id__in=exclude), [workspace.pk]).values("trajectory_id")
    pool = [row["trajectory_id"] for row in gold]
    # What each annotator already holds or has answered among them: two reads for all of them.
    seen: dict[int, set[int]] = {person: set() for person in share}
    for model, who in ((RatingAssignment, "annotator_id"), (Review, "reviewer_id")):
        pairs = model.objects.filter(**{f"{who}__in": list(share), "trajectory_id__in": gold})
        for person, pk in pairs.values_list(who, "trajectory_id"):
            seen[person].add(pk)
    people = {row.annotator.pk: row.annotator for row in rows}
    mixed = []
    for person, n in share.items():
        wanted = int(workspace.gold_rate * n + random.random())  # a draw of what to show, no secret
        fresh = [pk for pk in pool if pk not in seen[person]]
        mixed += [
            RatingAssignment(batch=batch, trajectory_id=pk, annotator=people[person])
            for pk in random.sample(fresh, min(wanted, len(fresh)))
        ]
    return mixed


def calibration_job_create(
    *, prompt_version: str, profile: int | None = None, actor=None, workspace: Workspace | None = None
) -> Job:
    """Queue a run of the judge configuration over the items people have rated (their current texts) in `workspace`
    (the `default` one when None): the job is that workspace's, and so is its run."""
    workspace_id = default_workspace_id() if workspace is None else workspace.pk
    if prompt_version not in PROMPTS:
        raise ValidationFailed(
            f"no prompt version {prompt_version!r}; versions: {', '.join(PROMPTS)}", "prompt_version"
        )
    chosen = EndpointProfile.objects.filter(pk=profile).first() if profile else selectors.judge_profile_in_use()
    if chosen is None:
        raise ValidationFailed(f"no endpoint profile with id {profile}", "profile")
    if not selectors.rated_items(workspace_ids=[workspace_id]).exists():
        raise ValidationFailed("nobody has rated an item yet: there is nothing to calibrate against", "prompt_version")
    with transaction.atomic():
        run = CalibrationRun.objects.create(
            prompt_version=prompt_version,
            profile=chosen,
            profile_name=chosen.name,
            created_by=actor if getattr(actor, "pk", None) else None,
            workspace_id=workspace_id,
        )
        job = job_create(
            kind=CALIBRATE,
            params={"run": run.pk, "prompt_version": prompt_version, "profile": chosen.pk},
            actor=actor,
            workspace_id=workspace_id,
        )
        run.job, run.workspace_id = job, job.workspace_id  # the run is its job's workspace's
        run.save(update_fields=["job", "workspace"])
    return job


def answer_record(*, run: CalibrationRun, trajectory_id: int, version: int, verdict: dict) -> CalibrationAnswer:
    """Store the judge's answer on one item, or the reason it gave none; the trajectory's verdicts are not touched."""
    answer, _ = CalibrationAnswer.objects.update_or_create(
        run=run,
        trajectory_id=trajectory_id,
        defaults={
            "trajectory_version": version,
            "scores": verdict.get("scores") or {},
            "passed": verdict.get("passed"),
            "error": verdict.get("error") or "",
            "llm_call": verdict.get("llm_call"),
        },
    )
    return answer


def run_summarize(*, run: CalibrationRun) -> dict:
    """The run's figures against the people's current ratings, kept on the run."""
    answers = selectors.run_answers(run)
    rows = selectors.current_rating_rows(workspace_ids=[owner_workspace_id(run)], trajectory_ids=list(answers))
    consensus = figures.human_consensus(rows)
    split = figures.disagreements(answers, consensus)
    summary = {
        "items": len(answers),
        "failed": run.answers.exclude(error="").count(),
        "figures": figures.judge_against_people(answers, consensus),
        "disagreement_count": len(split),
        "disagreements": split[:DISAGREEMENTS_KEPT],
    }
    run.summary = summary
    run.finished_at = timezone.now()
    run.save(update_fields=["summary", "finished_at"])
    return summary
