"""Writes to trajectories, by concern: creation by the pipelines and verdicts (`pipeline`), holds (`holds`),
decisions (`decisions`), edits, reverts and undo (`edits`), bulk actions (`bulk`) and editor drafts (`drafts`).

Every change a person makes advances the trajectory's version and names the version it was based on
(curation.versions); a decision stands only while the trajectory stays at the version it made, so an item is
accepted only while its current text is the one a person accepted.

The names below are the package's public ones: callers import them from here.
"""

from simia_web.curation.selectors.bulk import BulkOutcome
from simia_web.curation.selectors.trajectory import HUMAN_STATUSES

from .bulk import (
    BULK_JOB_KIND,
    BULK_SELECTIONS,
    BULK_UNDO_JOB_KIND,
    BULK_UNDO_MAX,
    BulkSelection,
    BulkUndoOutcome,
    BulkUndoTooLarge,
    SendBackOutcome,
    bulk_selection_register,
    cluster_keep_one,
    reviews_bulk,
    reviews_bulk_queue,
    reviews_bulk_undo,
    reviews_bulk_undo_queue,
    reviews_bulk_undo_range,
    reviews_send_back,
    trajectories_assign,
)
from .decisions import NOT_REVIEWABLE, STATUS_FOR_DECISION, review_decide
from .drafts import DRAFT_MAX_BYTES, draft_discard, draft_save
from .edits import review_undo, trajectory_edit, trajectory_revert
from .gold import gold_mark, gold_unmark
from .holds import (
    RELEASED,
    ReviewError,
    trajectory_claim_next,
    trajectory_hold,
    trajectory_release,
    trajectory_reserve,
)
from .pipeline import (
    ERRORED_TERMINATIONS,
    JUDGE_JOB_KIND,
    PREVIEW_CHARS,
    conversation_summary,
    trajectory_create,
    trajectory_judge_again,
    trajectory_status_for,
    verdict_record,
)
from .second_look import CONFIRM_REST_MAX, ConfirmRestOutcome, reviews_confirm_rest

__all__ = [
    "BULK_JOB_KIND",
    "BULK_SELECTIONS",
    "BULK_UNDO_JOB_KIND",
    "BULK_UNDO_MAX",
    "CONFIRM_REST_MAX",
    "DRAFT_MAX_BYTES",
    "ERRORED_TERMINATIONS",
    "HUMAN_STATUSES",
    "JUDGE_JOB_KIND",
    "NOT_REVIEWABLE",
    "PREVIEW_CHARS",
    "RELEASED",
    "STATUS_FOR_DECISION",
    "BulkOutcome",
    "BulkSelection",
    "BulkUndoTooLarge",
    "BulkUndoOutcome",
    "ConfirmRestOutcome",
    "ReviewError",
    "SendBackOutcome",
    "bulk_selection_register",
    "cluster_keep_one",
    "conversation_summary",
    "draft_discard",
    "draft_save",
    "gold_mark",
    "gold_unmark",
    "review_decide",
    "review_undo",
    "reviews_bulk",
    "reviews_bulk_queue",
    "reviews_bulk_undo",
    "reviews_bulk_undo_queue",
    "reviews_bulk_undo_range",
    "reviews_confirm_rest",
    "reviews_send_back",
    "trajectories_assign",
    "trajectory_claim_next",
    "trajectory_create",
    "trajectory_edit",
    "trajectory_hold",
    "trajectory_judge_again",
    "trajectory_release",
    "trajectory_reserve",
    "trajectory_revert",
    "trajectory_status_for",
    "verdict_record",
]
