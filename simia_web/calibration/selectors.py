"""Reads of calibration: current ratings, an annotator's assigned items, agreement between annotators, the runs and
their figures, the configuration in use and the best-calibrated one. Each is a bounded number of queries."""

from collections.abc import Callable

from django.db.models import Count, Exists, F, Max, OuterRef, QuerySet, Sum

from simia_web.curation.models import JudgeVerdict, Trajectory
from simia_web.llm.models import EndpointProfile, Stage
from simia_web.llm.selectors import profile_for_stage
from simia_web.simulation.judge import PROMPT_VERSION

from . import figures
from .models import CalibrationAnswer, CalibrationRun, CriterionRating, KeptFigures, RatingAssignment, RatingsRevision


def current_ratings() -> QuerySet[CriterionRating]:
    """Ratings of the text each trajectory has now: ratings of an older text are history."""
    return CriterionRating.objects.filter(trajectory_version=F("trajectory__text_version"))


def current_rating_rows(*, trajectory_ids: list[int] | None = None) -> list[tuple[int, int, dict]]:
    """(trajectory, annotator, scores) of the current ratings, of these trajectories when given."""
    ratings = current_ratings()
    if trajectory_ids is not None:
        ratings = ratings.filter(trajectory_id__in=trajectory_ids)
    return list(ratings.values_list("trajectory_id", "annotator_id", "scores").order_by("trajectory_id", "id"))


def rated_items() -> QuerySet[Trajectory]:
    """Trajectories with at least one rating of their current text: the human-labelled set, oldest first."""
    return Trajectory.objects.filter(Exists(current_ratings().filter(trajectory=OuterRef("pk")))).order_by("id")


def annotator_rating(trajectory: Trajectory, annotator) -> CriterionRating | None:
    """The annotator's rating of the trajectory's current text, its message labels fetched with it."""
    ratings = current_ratings().filter(trajectory=trajectory, annotator=annotator)
    return ratings.prefetch_related("message_labels").first()


def annotator_older_rating(trajectory: Trajectory, annotator) -> CriterionRating | None:
    """The annotator's latest rating of an earlier text of the trajectory (history once the text changed)."""
    older = CriterionRating.objects.filter(trajectory=trajectory, annotator=annotator)
    return older.exclude(trajectory_version=trajectory.text_version).order_by("-trajectory_version").first()


def rater_count(trajectory: Trajectory) -> int:
    """How many people rated the trajectory's current text."""
    return CriterionRating.objects.filter(trajectory=trajectory, trajectory_version=trajectory.text_version).count()


def inbox(annotator) -> QuerySet[RatingAssignment]:
    """The items assigned to `annotator`, each marked `done` when they have rated its current text."""
    rated = current_ratings().filter(trajectory=OuterRef("trajectory_id"), annotator=annotator)
    return (
        RatingAssignment.objects.filter(annotator=annotator)
        .select_related("trajectory")
        .only("id", "batch_id", "created_at", "trajectory__id", "trajectory__preview", "trajectory__status")
        .annotate(done=Exists(rated))
        .order_by("done", "id")
    )


def ratings_fingerprint() -> str:
    """What the current ratings are, in two small reads: the ratings' revision (every rating write advances it), the
    number of ratings (a trajectory deleted takes its ratings along) and the sum of their trajectories' text versions
    (a changed text makes its ratings history, and text versions only grow)."""
    revision = RatingsRevision.objects.values_list("number", flat=True).first() or 0
    facts = CriterionRating.objects.aggregate(ratings=Count("id"), texts=Sum("trajectory__text_version"))
    return f"{revision}:{facts['ratings']}:{facts['texts'] or 0}"


def _kept_figures(name: str, fingerprint: str, compute: Callable[[], dict]) -> dict:
    """The figures kept under `fingerprint`, else computed now and kept in place of older ones.

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


def inter_annotator_agreement(*, ratings: str | None = None) -> dict:
    """Krippendorff's alpha per criterion between the annotators of the current ratings (see figures), computed once
    per state of the ratings (`ratings`: their fingerprint, when the caller has read it already)."""
    ratings = ratings or ratings_fingerprint()
    return _kept_figures("inter_annotator", ratings, lambda: figures.inter_annotator(current_rating_rows()))


def verdicts_against_people(*, ratings: str | None = None) -> dict:
    """The judge's latest verdict on each rated item's current text against the people's ratings of it, computed once
    per state of the ratings (`ratings`, as above) and of the verdicts on rated items (verdicts are only added)."""
    rated = CriterionRating.objects.values("trajectory_id")
    verdicts = JudgeVerdict.objects.filter(trajectory_id__in=rated).count()
    ratings = ratings or ratings_fingerprint()
    return _kept_figures("judge_against_people", f"{ratings}:{verdicts}", _verdicts_against_people)


def _verdicts_against_people() -> dict:
    rows = current_rating_rows()
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


def run_list() -> QuerySet[CalibrationRun]:
    return CalibrationRun.objects.select_related("job", "created_by")


def _finished() -> QuerySet[CalibrationRun]:
    return CalibrationRun.objects.filter(finished_at__isnull=False, profile__isnull=False)


def configuration_in_use() -> dict:
    """The judge configuration jobs use unless told otherwise, and its latest finished run (None: not calibrated)."""
    profile = judge_profile_in_use()
    run = _finished().filter(profile=profile, prompt_version=PROMPT_VERSION).order_by("-id").first()
    return {"prompt_version": PROMPT_VERSION, "profile": profile, "run": run}


def _rank(run: CalibrationRun) -> tuple:
    overall = (run.summary.get("figures") or {}).get(figures.OVERALL) or {}
    kappa, accuracy = overall.get("kappa"), overall.get("accuracy")
    return (kappa is not None, kappa or 0.0, accuracy or 0.0, run.pk)


def best_calibrated() -> CalibrationRun | None:
    """The latest finished run of each configuration, best first by Cohen's kappa of the verdict against people's
    ratings, then accuracy, then the newest; None when no run has finished."""
    latest: dict[tuple[int | None, str], CalibrationRun] = {}
    for run in _finished().order_by("-id").only("id", "profile_id", "prompt_version", "profile_name", "summary"):
        latest.setdefault((run.profile_id, run.prompt_version), run)
    return max(latest.values(), key=_rank, default=None)
