"""Reads of calibration in the workspaces they are given: current ratings, an annotator's assigned items, agreement
between annotators, the runs and their figures, the configuration in use and the best-calibrated one. Each is a
bounded number of queries; another workspace's ratings, runs and figures are never read."""

import hashlib
from collections.abc import Callable, Iterable

from django.db.models import Count, Exists, F, Max, OuterRef, QuerySet, Sum

from simia_web.accounts.scoping import scoped
from simia_web.curation.models import JudgeVerdict, Review, Trajectory
from simia_web.llm.models import EndpointProfile, Stage
from simia_web.llm.selectors import profile_for_stage
from simia_web.simulation.judge import PROMPT_VERSION

from . import figures
from .models import CalibrationAnswer, CalibrationRun, CriterionRating, KeptFigures, RatingAssignment, RatingsRevision


def ratings_in(*, workspace_ids: Iterable[int]) -> QuerySet[CriterionRating]:
    """Every rating of the workspaces' trajectories, of any text version."""
    return scoped(CriterionRating.objects.all(), workspace_ids)


def current_ratings(*, workspace_ids: Iterable[int]) -> QuerySet[CriterionRating]:
    """Ratings of the text each of the workspaces' trajectories has now: ratings of an older text are history."""
    return ratings_in(workspace_ids=workspace_ids).filter(trajectory_version=F("trajectory__text_version"))


def current_rating_rows(
    *, workspace_ids: Iterable[int], trajectory_ids: list[int] | None = None
) -> list[tuple[int, int, dict]]:
    """(trajectory, annotator, scores) of the workspaces' current ratings, of these trajectories when given."""
    ratings = current_ratings(workspace_ids=workspace_ids)
    if trajectory_ids is not None:
        ratings = ratings.filter(trajectory_id__in=trajectory_ids)
    return list(ratings.values_list("trajectory_id", "annotator_id", "scores").order_by("trajectory_id", "id"))


def rated_items(*, workspace_ids: Iterable[int]) -> QuerySet[Trajectory]:
    """The workspaces' trajectories with at least one rating of their current text: the human-labelled set, oldest
    first."""
    rated = CriterionRating.objects.filter(trajectory=OuterRef("pk"), trajectory_version=OuterRef("text_version"))
    return scoped(Trajectory.objects.all(), workspace_ids).filter(Exists(rated)).order_by("id")


def annotator_rating(trajectory: Trajectory, annotator) -> CriterionRating | None:
    """The annotator's rating of the trajectory's current text, its message labels fetched with it."""
    current = {"trajectory_version": trajectory.text_version}
    ratings = CriterionRating.objects.filter(trajectory=trajectory, annotator=annotator, **current)
    return ratings.prefetch_related("message_labels").first()


def annotator_older_rating(trajectory: Trajectory, annotator) -> CriterionRating | None:
    """The annotator's latest rating of an earlier text of the trajectory (history once the text changed)."""
    older = CriterionRating.objects.filter(trajectory=trajectory, annotator=annotator)
    return older.exclude(trajectory_version=trajectory.text_version).order_by("-trajectory_version").first()


def rater_count(trajectory: Trajectory) -> int:
    """How many people rated the trajectory's current text."""
    return CriterionRating.objects.filter(trajectory=trajectory, trajectory_version=trajectory.text_version).count()


def inbox(annotator, *, workspace_ids: Iterable[int]) -> QuerySet[RatingAssignment]:
    """The items of the workspaces assigned to `annotator`, each marked `done` when they have rated its current
    text, and `decided` when a decision (or vote) of theirs on it was not undone."""
    rated = CriterionRating.objects.filter(
        trajectory=OuterRef("trajectory_id"),
        trajectory_version=OuterRef("trajectory__text_version"),
        annotator=annotator,
    )
    decided = Review.objects.filter(trajectory=OuterRef("trajectory_id"), reviewer=annotator, undone_at__isnull=True)
    return (
        scoped(RatingAssignment.objects.filter(annotator=annotator), workspace_ids)
        .select_related("trajectory")
        .only("id", "batch_id", "created_at", "trajectory__id", "trajectory__preview", "trajectory__status")
        .annotate(done=Exists(rated), decided=Exists(decided))
        .order_by("done", "id")
    )


def ratings_fingerprint(*, workspace_ids: Iterable[int]) -> str:
    """What the workspaces' current ratings are, in two small reads: the ratings' revision (every rating write
    advances it), the number of ratings (a trajectory deleted takes its ratings along) and the sum of their
    trajectories' text versions (a changed text makes its ratings history, and text versions only grow)."""
    revision = RatingsRevision.objects.values_list("number", flat=True).first() or 0
    ratings = ratings_in(workspace_ids=workspace_ids)
    facts = ratings.aggregate(ratings=Count("id"), texts=Sum("trajectory__text_version"))
    return f"{revision}:{facts['ratings']}:{facts['texts'] or 0}"


# KeptFigures.name holds a figure's name and the workspaces it was computed over.
KEPT_NAME_MAX = 40


def _kept_name(figure: str, workspace_ids: Iterable[int]) -> str:
    """The name figures of these workspaces are kept under: each set of workspaces keeps its own, and never reads
    another's."""
    name = f"{figure}@{','.join(map(str, sorted(set(workspace_ids))))}"
    if len(name) <= KEPT_NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode()).hexdigest()
    return f"{figure}#{digest[: KEPT_NAME_MAX - len(figure) - 1]}"


def _kept_figures(name: str, fingerprint: str, compute: Callable[[], dict]) -> dict:
    """The figures kept under `name` (a figure and the workspaces it is of) and `fingerprint`, else computed now and
    kept in place of older ones.

    The fingerprint is read before the figures are computed, so what is kept is never older than what it names. A
    read that writes: the figures are a cache every web process shares, not data of their own."""
    kept = KeptFigures.objects.filter(name=name, fingerprint=fingerprint).values_list("figures", flat=True).first()
    if kept is not None:
        return kept
    computed = compute()
    KeptFigures.objects.bulk_create(
        [KeptFigures(name=name, fingerprint=fingerprint, figures=computed)], ignore_conflicts=True
    )
    KeptFigures.objects.filter(name=name).exclude(fingerprint=fingerprint).delete()
    return computed


def inter_annotator_agreement(*, workspace_ids: Iterable[int], ratings: str | None = None) -> dict:
    """Krippendorff's alpha per criterion between the annotators of the workspaces' current ratings (see figures),
    computed once per state of the ratings (`ratings`: their fingerprint, when the caller has read it already)."""
    workspace_ids = list(workspace_ids)
    ratings = ratings or ratings_fingerprint(workspace_ids=workspace_ids)
    return _kept_figures(
        _kept_name("inter_annotator", workspace_ids),
        ratings,
        lambda: figures.inter_annotator(current_rating_rows(workspace_ids=workspace_ids)),
    )


def verdicts_against_people(*, workspace_ids: Iterable[int], ratings: str | None = None) -> dict:
    """The judge's latest verdict on each of the workspaces' rated items' current text against the people's ratings
    of it, computed once per state of the ratings (`ratings`, as above) and of the verdicts on rated items (verdicts
    are only added)."""
    workspace_ids = list(workspace_ids)
    rated = ratings_in(workspace_ids=workspace_ids).values("trajectory_id")
    verdicts = JudgeVerdict.objects.filter(trajectory_id__in=rated).count()
    ratings = ratings or ratings_fingerprint(workspace_ids=workspace_ids)
    return _kept_figures(
        _kept_name("judge_against_people", workspace_ids),
        f"{ratings}:{verdicts}",
        lambda: _verdicts_against_people(workspace_ids),
    )


def _verdicts_against_people(workspace_ids: list[int]) -> dict:
    rows = current_rating_rows(workspace_ids=workspace_ids)
    items = sorted({item for item, _, _ in rows})
    usable = JudgeVerdict.objects.filter(
        trajectory_id__in=items, error="", trajectory_version__gte=F("trajectory__text_version")
    )
    # The latest per item as a grouped subquery, which every backend runs (DISTINCT ON is PostgreSQL's alone).
    latest_ids = usable.order_by().values("trajectory_id").annotate(latest=Max("id")).values("latest")
    latest = JudgeVerdict.objects.filter(pk__in=latest_ids).values_list("trajectory_id", "scores", "passed")
    answers = {item: (scores or {}, passed) for item, scores, passed in latest}
    return figures.judge_against_people(answers, figures.human_consensus(rows))


def judge_profile_in_use() -> EndpointProfile:
    """The endpoint profile the judge stage uses now (its route, else the default)."""
    return profile_for_stage(Stage.JUDGE)


def run_answers(run: CalibrationRun) -> dict[int, tuple[dict, bool | None]]:
    """{trajectory: (scores, passed)} of the run's usable answers on texts that are still current."""
    rows = (
        CalibrationAnswer.objects.filter(run=run, error="", trajectory_version=F("trajectory__text_version"))
        .values_list("trajectory_id", "scores", "passed")
        .order_by("trajectory_id")
    )
    return {item: (scores, passed) for item, scores, passed in rows}


def run_failures(run: CalibrationRun) -> QuerySet[CalibrationAnswer]:
    return run.answers.exclude(error="").only("id", "run_id", "trajectory_id", "error")


def runs_in(*, workspace_ids: Iterable[int]) -> QuerySet[CalibrationRun]:
    """The workspaces' calibration runs, newest first."""
    return scoped(CalibrationRun.objects.all(), workspace_ids).order_by("-id")


def run_list(*, workspace_ids: Iterable[int]) -> QuerySet[CalibrationRun]:
    return runs_in(workspace_ids=workspace_ids).select_related("job", "created_by")


def _finished(workspace_ids: Iterable[int] | None) -> QuerySet[CalibrationRun]:
    runs = CalibrationRun.objects.all() if workspace_ids is None else runs_in(workspace_ids=workspace_ids)
    return runs.filter(finished_at__isnull=False, profile__isnull=False)


def configuration_in_use(*, workspace_ids: Iterable[int]) -> dict:
    """The judge configuration jobs use unless told otherwise, and its latest finished run in the workspaces (None:
    not calibrated there)."""
    profile = judge_profile_in_use()
    run = _finished(workspace_ids).filter(profile=profile, prompt_version=PROMPT_VERSION).order_by("-id").first()
    return {"prompt_version": PROMPT_VERSION, "profile": profile, "run": run}


def _rank(run: CalibrationRun) -> tuple:
    overall = (run.summary.get("figures") or {}).get(figures.OVERALL) or {}
    kappa, accuracy = overall.get("kappa"), overall.get("accuracy")
    return (kappa is not None, kappa or 0.0, accuracy or 0.0, run.pk)


def best_calibrated(*, workspace_ids: Iterable[int] | None = None) -> CalibrationRun | None:
    """Of the workspaces' runs, the latest finished run of each configuration, best first by Cohen's kappa of the
    verdict against people's ratings, then accuracy, then the newest; None when no run has finished there. None for
    `workspace_ids` reads every workspace's runs (a caller that names none yet: a job queued without a workspace)."""
    latest: dict[tuple[int | None, str], CalibrationRun] = {}
    for run in (
        _finished(workspace_ids).order_by("-id").only("id", "profile_id", "prompt_version", "profile_name", "summary")
    ):
        latest.setdefault((run.profile_id, run.prompt_version), run)
    return max(latest.values(), key=_rank, default=None)
