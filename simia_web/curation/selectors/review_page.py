"""What a page that reviews one trajectory shows: the conversation page, the judge's verdicts, rule violations,
reviews, the hold and the reader's draft (`review_context`, shared by the trajectory page and any other page that
decides items through curation, such as an audit's item page), the head both draw with their own links
(`ReviewNav`, templates/curation/_review_head.html), and the trajectory page's own navigation through the queue,
history, tools and near-duplicates (`trajectory_page_context`)."""

from dataclasses import dataclass

from django.conf import settings
from django.urls import reverse

from simia_web.catalog.guidelines import guidelines_in_force
from simia_web.core.clipping import clipped, message_href, message_page, shown_in_full
from simia_web.core.display import pretty_json
from simia_web.curation.duplicates import trajectory_duplicates
from simia_web.curation.models import (
    PENDING_STATUSES,
    WAITING_FOR_REVIEWER,
    Decision,
    GoldItem,
    ReviewStage,
    Trajectory,
)
from simia_web.simulation.judge import CRITERIA, GRADES

from . import queue as queue_reads
from .conversation import chat_items, revision_history
from .gold import first_gold_answer, gold_feedback
from .queue import filter_query, queue_for, queue_neighbours, queue_search_entries
from .trajectory import draft_for, reservation_holder, stages_hidden_from, standing_review, verdicts_split

# The review page's list of tools is cut here (the editor and exports have them all), and its sidebar lists this
# many cited messages and rule violations.
TOOLS_CHARS = 20_000
SIDEBAR_ITEMS = 50


@dataclass(frozen=True)
class ReviewNav:
    """Where the head of a page that reviews one item of a list leads (templates/curation/_review_head.html): back to
    the list, to its neighbours, and the stream's forms: skip to the next free item, let go of this one, or start
    deciding from here when the reader only views it."""

    back_url: str
    back_label: str  # the list the page belongs to: "Queue", "Audit"
    previous_url: str | None
    next_url: str | None
    skip_url: str  # claims the next free item after `skip_after`
    skip_after: int
    holding: str  # what the reader does while holding the item: "Reviewing", "Auditing"
    release_url: str
    claim_url: str
    claim_label: str
    claimable: bool  # the "viewing only" notice offers `claim_url`
    release_fields: tuple[tuple[str, object], ...] = ()  # hidden inputs of the release form
    claim_fields: tuple[tuple[str, object], ...] = ()  # and of the claim form


def _with_get(url: str, request) -> str:
    encoded = request.GET.urlencode()
    return f"{url}?{encoded}" if encoded else url


def visible_reviews(reviews: list, user) -> list:
    """The reviews of an item `user` may read (stages_hidden_from)."""
    hidden = stages_hidden_from(user)
    return [r for r in reviews if r.stage not in hidden or r.reviewer_id == user.pk]


def review_context(request, trajectory: Trajectory, *, revealed: bool = True) -> dict:
    """The keys every review of one trajectory shows. With `revealed` False the judge's verdicts are left out (and
    nothing is marked as cited), so they do not anchor a decision."""
    verdict, failed_verdicts, older_verdicts = (
        verdicts_split(list(trajectory.verdicts.all())) if revealed else (None, [], [])
    )
    cited = set(verdict.cited_messages or []) if verdict else set()
    holder = reservation_holder(trajectory, request.user)
    reviews = visible_reviews(list(trajectory.reviews.all()), request.user)
    standing = standing_review(reviews)
    awaiting = standing if standing is not None and standing.stage in WAITING_FOR_REVIEWER else None
    page = message_page(request, trajectory.messages or [])
    params = request.GET.copy()
    for name in ("page", "full"):
        params.pop(name, None)
    page_query = params.urlencode()
    violations = list(trajectory.violations.all())
    return {
        "t": trajectory,
        "revealed": revealed,
        "page": page,
        "page_query": page_query,
        "items": chat_items(
            trajectory, cited, start=max(page.start_index() - 1, 0), stop=page.end_index(), full=shown_in_full(request)
        ),
        # The sidebar's links reach messages on any page; it lists the first SIDEBAR_ITEMS of each.
        "cited_links": [
            (i, message_href(page_query, i)) for i in sorted(i for i in cited if isinstance(i, int))[:SIDEBAR_ITEMS]
        ],
        "violations": [
            (v, message_href(page_query, v.message_index) if v.message_index is not None else "")
            for v in violations[:SIDEBAR_ITEMS]
        ],
        "more_violations": max(len(violations) - SIDEBAR_ITEMS, 0),
        "verdict": verdict,
        "verdict_stale": verdict is not None and verdict.trajectory_version < trajectory.text_version,
        "verdict_scores": sorted((verdict.scores or {}).items()) if verdict else [],
        "failed_verdicts": failed_verdicts,
        "older_verdicts": older_verdicts,
        "reviews": reviews,
        "undoable_id": standing.pk if standing else None,
        "holder": holder,
        "stream": request.GET.get("stream") == "1" and holder is None,
        "reservation_seconds": settings.SIMIA_RESERVATION_SECONDS,
        "draft": draft_for(trajectory, request.user),
        "guidelines": guidelines_in_force(domain_id=trajectory.domain_id),
        # The reviewer stage: the decision awaiting review, and the answers that confirm or overturn it.
        "awaiting": awaiting,
        # The votes a dispute rests on, the standing (last) one included.
        "votes": [r for r in reviews if r.pk in set(awaiting.sample or [])] + [awaiting]
        if awaiting is not None and awaiting.stage == ReviewStage.DISPUTED
        else [],
        "can_settle": awaiting is not None and request.user.has_role("reviewer"),
        "confirm_decision": "reject" if awaiting and awaiting.decision == Decision.REJECT else "accept",
        "overturn_decision": "accept" if awaiting and awaiting.decision == Decision.REJECT else "reject",
        # Where the decision card's forms and links lead; another page sets its own.
        "decide_url": _with_get(reverse("trajectory-decide", args=[trajectory.pk]), request),
        "reload_url": _with_get(reverse("trajectory", args=[trajectory.pk]), request),
        "edit_url": _with_get(reverse("trajectory-edit", args=[trajectory.pk]), request),
    }


def trajectory_page_context(request, trajectory: Trajectory, *, workspace_ids: list[int], **extra) -> dict:
    """The trajectory page: the review keys, and its place in the filtered queue of the workspaces `workspace_ids`,
    history, tools and near-duplicates. `extra` (a refusal's conflict or error, the decision just made) is added
    last."""
    context = review_context(request, trajectory)
    filterset, qs, sort = queue_for(request.GET, request, workspace_ids=workspace_ids)
    limit = queue_reads.QUEUE_COUNT_LIMIT
    search = queue_search_entries(filterset, page_size=1, workspace_ids=workspace_ids)
    previous_id, next_id, position = queue_neighbours(qs, trajectory.pk, sort, position_limit=limit, search=search)
    query = filter_query(request.GET)
    undoable_id = context["undoable_id"]

    def with_query(url: str) -> str:
        return f"{url}?{query}" if query else url

    pending = trajectory.status in PENDING_STATUSES and trajectory.reviewable
    curator = request.user.has_role("curator")
    # Only curators learn that an item is gold before deciding it; others once they have answered it.
    gold = GoldItem.objects.filter(trajectory=trajectory).first() if curator else None
    answer = None if curator else first_gold_answer(context["reviews"], request.user)
    context.update(
        {
            "pending": pending,
            "query": query,
            "nav": ReviewNav(
                back_url=with_query(reverse("review-queue")),
                back_label="Queue",
                previous_url=with_query(reverse("trajectory", args=[previous_id])) if previous_id else None,
                next_url=with_query(reverse("trajectory", args=[next_id])) if next_id else None,
                skip_url=with_query(reverse("review-next")),
                skip_after=trajectory.pk,
                holding="Reviewing",
                release_url=with_query(reverse("trajectory-reservation", args=[trajectory.pk])),
                release_fields=(("action", "release"), ("next", "queue")),
                claim_url=with_query(reverse("review-next")),
                claim_fields=(("here", trajectory.pk),),
                claim_label="Start reviewing from here",
                claimable=pending,
            ),
            "undo_url": f"{reverse('review-undo', args=[undoable_id])}{'?' + query if query else ''}"
            if undoable_id
            else None,
            "judge_again": True,
            "previous_id": previous_id,
            "next_id": next_id,
            "position": position,
            "position_capped": position is not None and position > limit,
            "count_limit": limit,
            "revisions": revision_history(trajectory),
            "tools_json": clipped(pretty_json(trajectory.tools), limit=TOOLS_CHARS),
            "duplicates": trajectory_duplicates(trajectory.pk),
            "gold": gold,
            # The gold card's expected rating of each criterion (None: not rated), on the judge's scale.
            "gold_expected": [(c, gold.expected_scores.get(c) if gold else None) for c in CRITERIA] if curator else [],
            "grades": GRADES,
            "gold_feedback": gold_feedback(trajectory=trajectory, answer=answer) if answer else None,
        }
    )
    context.update(extra)
    return context
