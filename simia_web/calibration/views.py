"""Calibration pages: the rating panel of the review page, assigned items, handing items out, and the calibration
page (judge configurations against people's ratings, and agreement between annotators), each of the current
workspace only: another workspace's item or run is not found. Everything an LLM or a person wrote is rendered
escaped."""

from django.conf import settings
from django.contrib import messages
from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404, redirect, render

from simia_web.accounts.permissions import role_required
from simia_web.accounts.scoping import page_workspace_ids, scoped
from simia_web.core.errors import ValidationFailed
from simia_web.curation.models import Trajectory
from simia_web.curation.selectors.queue import queue_filterset
from simia_web.curation.selectors.trajectory import trajectories_in
from simia_web.simulation.judge import CRITERIA, CRITERION_QUESTIONS, GRADES, PASS_THRESHOLD

from . import selectors
from .figures import OVERALL
from .forms import BLANK_LABEL_ROWS, AssignmentForm, rating_posted
from .models import AssignmentBatch, CalibrationRun, ErrorType
from .services import RatingStale, assignments_create, rating_save

PAGE_SIZE = 50
ROWS = (*CRITERIA, OVERALL)


def _grade_text(value) -> str:
    """A grade as its option's value ("0.4"); "" for none, or for a posted value that is not a number."""
    try:
        return str(float(value))
    except (TypeError, ValueError):
        return ""


def _panel(request, trajectory: Trajectory, *, posted: dict | None = None, status: int = 200, **extra):
    mine = selectors.annotator_rating(trajectory, request.user)
    scores = posted["scores"] if posted else (mine.scores if mine else {})
    labels = (
        [{"index": i, **label} for i, label in posted["message_labels"].items()]
        if posted
        else [
            {"index": m.message_index, "error_types": m.error_types, "comment": m.comment}
            for m in mine.message_labels.all()
        ]
        if mine
        else []
    )
    labels += [{"index": "", "error_types": [], "comment": ""}] * BLANK_LABEL_ROWS
    context = {
        "t": trajectory,
        "criteria": [
            {
                "name": c,
                "question": CRITERION_QUESTIONS[c],
                "value": _grade_text(scores.get(c)),
            }
            for c in CRITERIA
        ],
        "grades": [str(g) for g in GRADES],
        "error_types": ErrorType.choices,
        "labels": [{"row": row, **label} for row, label in enumerate(labels)],
        "comment": posted["comment"] if posted else (mine.comment if mine else ""),
        "mine": mine,
        "older": selectors.annotator_older_rating(trajectory, request.user),
        "raters": selectors.rater_count(trajectory),
        **extra,
    }
    return render(request, "calibration/_rating.html", context, status=status)


@role_required("annotator")
def rating_panel(request, pk: int):
    """The review page's rating panel (loaded by htmx); a POST saves the ratings of the text version read."""
    trajectories = trajectories_in(workspace_ids=page_workspace_ids(request.user))
    trajectory = get_object_or_404(trajectories.only("id", "text_version", "version", "messages"), pk=pk)
    if request.method != "POST":
        return _panel(request, trajectory)
    posted = rating_posted(request.POST)
    try:
        version = int(request.POST.get("text_version", ""))
    except ValueError:
        version = -1
    try:
        rating_save(trajectory_id=pk, annotator=request.user, text_version=version, **posted)
    except RatingStale as exc:
        trajectory.refresh_from_db(fields=["text_version", "version", "messages"])
        return _panel(request, trajectory, posted=posted, error=exc.detail, status=409)
    except ValidationFailed as exc:
        return _panel(request, trajectory, posted=posted, error=exc.detail, status=400)
    return _panel(request, trajectory, saved=True)


@role_required("annotator")
def assigned(request):
    """The items of the current workspace handed to the signed-in annotator, those still to rate first."""
    items = selectors.inbox(request.user, workspace_ids=page_workspace_ids(request.user))
    page = Paginator(items, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "calibration/assigned.html", {"page": page, "query": ""})


@role_required("curator")
def assignments(request):
    """Hand items of the current workspace (a queue filter or ids) to k of the annotators chosen among its
    members."""
    workspace_ids = page_workspace_ids(request.user)
    form = AssignmentForm(request.POST or None, workspace_ids=workspace_ids)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        if data["query"] is not None:
            items = queue_filterset(params=data["query"], request=request, workspace_ids=workspace_ids).qs
            selection = {"query": data["query"].urlencode()}
        else:
            items = trajectories_in(workspace_ids=workspace_ids).filter(pk__in=data["ids"])
            selection = {"ids": data["ids"]}
        ids = list(items.order_by("id").values_list("id", flat=True)[: data["limit"]])
        try:
            made = assignments_create(
                trajectory_ids=ids,
                annotators=list(data["annotators"]),
                overlap=data["overlap"],
                consensus=data["consensus"],
                actor=request.user,
                selection=selection,
                workspace=request.user.current_workspace,
            )
        except ValidationFailed as exc:
            form.add_error(None, exc.detail)
        else:
            gold = f", and {made['gold']} gold items mixed in" if made["gold"] else ""
            messages.success(request, f"{made['assignments']} assignments of {made['items']} items{gold}.")
            return redirect("calibration-assignments")
    batches = scoped(AssignmentBatch.objects.select_related("created_by"), workspace_ids).order_by("-id")[:PAGE_SIZE]
    return render(request, "calibration/assignments.html", {"form": form, "batches": batches})


def _figure_rows(run: CalibrationRun | None) -> dict:
    return ((run.summary or {}).get("figures") or {}) if run else {}


@role_required("annotator")
def calibration_page(request, pk: int | None = None):
    """A run's figures per criterion beside those of the configuration in use, with its disagreements; the runs;
    agreement between annotators: the current workspace's."""
    workspace_ids = page_workspace_ids(request.user)
    in_use = selectors.configuration_in_use(workspace_ids=workspace_ids)
    runs = selectors.run_list(workspace_ids=workspace_ids)
    run = get_object_or_404(runs, pk=pk) if pk else runs.first()
    chosen, current = _figure_rows(run), _figure_rows(in_use["run"])
    rows = [{"name": name, "run": chosen.get(name), "in_use": current.get(name)} for name in ROWS]
    return render(
        request,
        "calibration/calibration.html",
        {
            "run": run,
            "in_use": in_use,
            "best": selectors.best_calibrated(workspace_ids=workspace_ids),
            "rows": rows,
            "failures": selectors.run_failures(run)[:PAGE_SIZE] if run else [],
            "runs": runs[:PAGE_SIZE],
            "iaa": selectors.inter_annotator_agreement(workspace_ids=workspace_ids),
            "threshold": PASS_THRESHOLD,
            "max_units": settings.SIMIA_MAX_UNITS_PER_JOB,
        },
    )


@role_required("annotator")
def agreement_panel(request):
    """The agreement page's per-criterion part (loaded by htmx): the judge's verdicts standing on the rated texts
    against people's ratings, and agreement between annotators, in the current workspace."""
    workspace_ids = page_workspace_ids(request.user)
    ratings = selectors.ratings_fingerprint(workspace_ids=workspace_ids)  # read once for both figures
    return render(
        request,
        "calibration/_agreement.html",
        {
            "figures": selectors.verdicts_against_people(workspace_ids=workspace_ids, ratings=ratings),
            "criteria": ROWS,
            "iaa": selectors.inter_annotator_agreement(workspace_ids=workspace_ids, ratings=ratings),
        },
    )
