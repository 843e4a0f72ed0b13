"""Trajectories and what people and the judge say of them, one module per concern: the trajectory with its
statuses and the review queue's order (`trajectory`), what the rules and the judge found (`findings`), what people
decided, changed and drafted (`decisions`), and the rollups kept with every write (`rollups`). Every name is
imported from here, `simia_web.curation.models`."""

from .consensus import ConsensusItem
from .decisions import (
    PEER_STAGES,
    SETTLED_ONE_BY_ONE,
    STANDING,
    STATUS_FOR_DECISION,
    WAITING_FOR_REVIEWER,
    Change,
    Decision,
    EditorDraft,
    Review,
    ReviewStage,
    TrajectoryChange,
)
from .findings import JudgeVerdict, RuleViolation
from .gold import GoldItem
from .rollups import UNDATED, Figure, Rollup
from .trajectory import (
    PENDING_STATUSES,
    PRIORITY,
    QUEUE_FILTER_COLUMNS,
    QUEUE_ORDER_KEYS,
    QUEUE_SORT_KEYS,
    QueueSearchEntry,
    Trajectory,
    TrajectoryKind,
    TrajectoryStatus,
    missing_last,
    pipeline_status,
)

__all__ = [
    "PENDING_STATUSES",
    "PRIORITY",
    "QUEUE_FILTER_COLUMNS",
    "QUEUE_ORDER_KEYS",
    "QUEUE_SORT_KEYS",
    "PEER_STAGES",
    "SETTLED_ONE_BY_ONE",
    "STANDING",
    "STATUS_FOR_DECISION",
    "WAITING_FOR_REVIEWER",
    "UNDATED",
    "Change",
    "ConsensusItem",
    "Decision",
    "EditorDraft",
    "Figure",
    "GoldItem",
    "JudgeVerdict",
    "QueueSearchEntry",
    "Review",
    "ReviewStage",
    "Rollup",
    "RuleViolation",
    "Trajectory",
    "TrajectoryChange",
    "TrajectoryKind",
    "TrajectoryStatus",
    "missing_last",
    "pipeline_status",
]
