"""The review queue: its filters, its orders and keyset pages along them, and an item's place in it. A queue holds
the trajectories of the workspaces it is given (a page's: the user's current one), never another's."""

import json
from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, F, Func, QuerySet, Value

from simia_web.accounts.scoping import scoped
from simia_web.curation.filters import ALL, PENDING, TrajectoryFilter
from simia_web.curation.models import (
    QUEUE_ORDER_KEYS,
    QUEUE_SORT_KEYS,
    Figure,
    QueueSearchEntry,
    Trajectory,
)

from .rollups import rollup_rows
from .trajectory import free_for


@dataclass(frozen=True)
class QueueSort:
    """An order of the queue as keys that are all ascending or all descending, ending with a unique column,
    so that a page boundary is one row comparison (keyset paging: the same cost at any depth)."""

    keys: tuple
    descending: bool = False

    def order_by(self, reverse: bool = False) -> list:
        descending = self.descending != reverse
        return [key.desc() if descending else key.asc() for key in self.keys]


def _sorts() -> dict[str, QueueSort]:
    """Each column both ways; each way walks an index of QUEUE_SORT_KEYS (score: one per way, missing last)."""
    sorts = {"priority": QueueSort(QUEUE_ORDER_KEYS)}
    for name in ("date", "score", "turns", "tools", "rules", "model", "domain"):
        sorts[name] = QueueSort(QUEUE_SORT_KEYS[name])
        sorts[f"-{name}"] = QueueSort(QUEUE_SORT_KEYS.get(f"-{name}", QUEUE_SORT_KEYS[name]), descending=True)
    return sorts


QUEUE_SORTS = _sorts()
# SQLite keeps no copy of the domain's name on the trajectory (PostgreSQL's trigger does): there it joins.
JOINED_DOMAIN_SORTS = {
    "domain": QueueSort((F("domain__name"), F("id"))),
    "-domain": QueueSort((F("domain__name"), F("id")), descending=True),
}
DEFAULT_SORT = "priority"


class RowComparison(Func):
    """(k1, k2, ...) > (v1, v2, ...) (or <): a B-tree index on the keys answers it as one range."""

    output_field = BooleanField()
    conditional = True

    def __init__(self, keys, values, operator: str):
        super().__init__(*keys, *(Value(v) for v in values))
        self.operator = operator

    # Written whole: Func's function, template and arg_joiner do not apply to a comparison of rows.
    def as_sql(self, compiler, connection, **extra_context):  # type: ignore[override]
        parts, params = [], []
        for expression in self.get_source_expressions():
            sql, expression_params = compiler.compile(expression)
            parts.append(sql)
            params.extend(expression_params)
        half = len(parts) // 2
        return f"({', '.join(parts[:half])}) {self.operator} ({', '.join(parts[half:])})", params


def queue_filterset(*, params, request, workspace_ids: Iterable[int] | None = None) -> TrajectoryFilter:
    """The queue's filters (TrajectoryFilter's parameters) over the trajectories of the workspaces `workspace_ids`;
    the status defaults to `pending`, the items waiting for a person. None filters every trajectory, for a caller
    that cuts the result to its workspace itself (an audit's population)."""
    data = params.copy()
    if not data.get("status"):
        # The items decided under older guidelines are decided ones: that filter alone looks at every status.
        data["status"] = ALL if data.get("guidelines") else PENDING
    trajectories = (
        Trajectory.objects.all() if workspace_ids is None else scoped(Trajectory.objects.all(), workspace_ids)
    )
    return TrajectoryFilter(data, queryset=trajectories, request=request)


# The filters a search entry answers besides the words: a search of the waiting items with no other reads entries.
SEARCH_ENTRY_FILTERS = {"q", "status", "domain", "verdict", "judge_passed", "min_score", "max_score"}
# Walking the queue's order index pays about ten times more per row it passes (it reads the row's vector) than
# reading a match's entry does: reading every match is cheaper while matches² < page × WALK_TO_FETCH × entries.
WALK_TO_FETCH = 10


@dataclass(frozen=True)
class SearchEntries:
    """A text search of the items waiting for review, as search entries (QueueSearchEntry): always counted there (a
    narrow scan that stops at the count's bound); ordered there when the words are `rare`, while a common word is
    found sooner by walking the trajectories' queue index in its order."""

    matches: QuerySet[QueueSearchEntry]
    rare: bool


def queue_search_entries(
    filterset: TrajectoryFilter, *, page_size: int, workspace_ids: Iterable[int]
) -> SearchEntries | None:
    """The queue's search entries (of the workspaces `workspace_ids`) when the queue is a text search of the items
    waiting for review with filters an entry answers; else None. PostgreSQL only: the trigger that keeps the entries
    is there. Whether the words are rare is the planner's estimate of their matches (its statistics: nothing is
    read)."""
    if connection.vendor != "postgresql" or not filterset.is_valid():
        return None
    given = {name for name, value in filterset.form.cleaned_data.items() if value not in (None, "")}
    if "q" not in given or filterset.form.cleaned_data.get("status") != PENDING or given - SEARCH_ENTRY_FILTERS:
        return None
    data = filterset.data.copy()
    data.pop("status", None)  # every entry is waiting for review
    theirs = scoped(QueueSearchEntry.objects.all(), workspace_ids)
    matches = TrajectoryFilter(data, queryset=theirs, request=filterset.request).qs
    expected, entries = _planned_rows(matches), _planned_rows(QueueSearchEntry.objects.all())
    return SearchEntries(matches, rare=expected**2 < (page_size + 1) * WALK_TO_FETCH * entries)


def _planned_rows(qs: QuerySet) -> float:
    """How many rows the planner expects the query to return (from its statistics: nothing is read)."""
    return json.loads(qs.order_by().explain(format="json"))[0]["Plan"]["Plan Rows"]


def queue_sort(name: str | None) -> QueueSort:
    name = name if name in QUEUE_SORTS else DEFAULT_SORT
    if name in JOINED_DOMAIN_SORTS and connection.vendor != "postgresql":
        return JOINED_DOMAIN_SORTS[name]
    return QUEUE_SORTS[name]


def queue_ordered(qs: QuerySet, sort: str | None = None) -> QuerySet:
    return qs.order_by(*queue_sort(sort).order_by())


def _boundary(order: QueueSort, trajectory_id: int):
    """The sort key values of one row (from the whole table: the row may have left the filtered queue)."""
    names = {f"k{i}": key for i, key in enumerate(order.keys)}
    return Trajectory.objects.filter(pk=trajectory_id).annotate(**names).values_list(*names).first()


def _beyond(qs: QuerySet, order: QueueSort, values, reverse: bool) -> QuerySet:
    later = "<" if order.descending else ">"
    operator = {">": "<", "<": ">"}[later] if reverse else later
    return qs.filter(RowComparison(order.keys, values, operator)).order_by(*order.order_by(reverse=reverse))


def queue_after(qs: QuerySet, trajectory_id: int, sort: str | None = None, reverse: bool = False) -> QuerySet:
    """The rows of the queue after (or, with reverse, before and in reverse order) a given row."""
    order = queue_sort(sort)
    values = _boundary(order, trajectory_id)
    return qs.none() if values is None else _beyond(qs, order, values, reverse)


@dataclass
class QueuePage:
    rows: list
    count: int
    number: int
    size: int
    has_next: bool
    count_capped: bool = False  # more than `count` match; counting them all would read every match

    @property
    def num_pages(self) -> int:
        return max(1, -(-self.count // self.size))

    @property
    def has_previous(self) -> bool:
        return self.number > 1

    @property
    def first_id(self):
        return self.rows[0].pk if self.rows else None

    @property
    def last_id(self):
        return self.rows[-1].pk if self.rows else None

    def numbers(self) -> list[int | None]:
        """Page numbers to offer: the first, the last and two either side of this one (None marks a gap)."""
        wanted = sorted({1, self.num_pages, *range(max(1, self.number - 2), min(self.num_pages, self.number + 2) + 1)})
        shown: list[int | None] = []
        last = 0
        for n in wanted:
            if n > last + 1:
                shown.append(None)
            shown.append(n)
            last = n
        return shown


def queue_page(
    qs: QuerySet[Trajectory],
    sort: str | None,
    *,
    number: int = 1,
    after=None,
    before=None,
    size: int = 50,
    count_limit: int | None = None,
    search: SearchEntries | None = None,
) -> QueuePage:
    """One page of the queue. Next/previous follow a row id (keyset); a page number jumps by offset along
    the index, and the last page is read from the other end. With `count_limit`, counting stops there.

    The page's ids are found first (an index-only scan where an index covers the order), then only those rows are
    read. With `search` (the same queue as search entries, see queue_search_entries) they are counted there, and
    ordered there when its words are rare."""
    counted = qs if search is None else search.matches
    keys = search.matches if search is not None and search.rare else qs
    # Unordered: a bounded count in the queue's order walks the order's index past every row the filters leave
    # out, where the filters' own index stops at the bound (a hundred times faster at a million rows).
    count = counted.order_by()[: count_limit + 1].count() if count_limit else counted.count()
    capped = False
    if count_limit and count > count_limit:
        count, capped = count_limit, True
    num_pages = max(1, -(-count // size))
    number = min(max(1, number), num_pages)
    last_page = after is None and before is None and number == num_pages and number > 1 and not capped
    if after is not None:
        window = queue_after(keys, after, sort)[: size + 1]
    elif before is not None:
        window = queue_after(keys, before, sort, reverse=True)[:size]
    elif last_page:  # read from the other end
        window = keys.order_by(*queue_sort(sort).order_by(reverse=True))[: count - (num_pages - 1) * size]
    else:
        window = queue_ordered(keys, sort)[(number - 1) * size : number * size + 1]
    ids = list(window.values_list("pk", flat=True))
    if before is not None or last_page:
        ids.reverse()
    by_id = queue_page_rows(qs if keys is qs else Trajectory.objects.all()).order_by().in_bulk(ids)
    rows = [by_id[pk] for pk in ids if pk in by_id]
    has_next = before is not None or len(rows) > size
    return QueuePage(rows[:size], count, number, size, has_next=has_next, count_capped=capped)


# A trajectory's columns no list row shows: the conversation, its tools and states (kilobytes each, parsed as JSON).
ROW_UNSHOWN = ("messages", "tools", "steps", "initial_state", "final_state", "provenance", "search_vector")


def queue_page_rows(qs: QuerySet[Trajectory]) -> QuerySet[Trajectory]:
    """What a queue row shows, in one query (no per-row lookups)."""
    return qs.select_related("domain", "assigned_to", "reserved_by").defer(*ROW_UNSHOWN)


def queue_neighbours(
    qs: QuerySet[Trajectory],
    trajectory_id: int,
    sort: str | None = None,
    *,
    position_limit: int,
    search: SearchEntries | None = None,
) -> tuple[int | None, int | None, int | None]:
    """(previous id, next id, 1-based position) of a trajectory within the ordered queue: index range reads,
    no numbering of the whole queue. The position is None when the trajectory is not (or no longer) in it, and
    counted up to `position_limit` (a position past it is `position_limit + 1`: counting further reads every row
    ahead of it). With `search` (see queue_page) they are read from its entries when its words are rare."""
    keys = search.matches if search is not None and search.rare else qs
    order = queue_sort(sort)
    values = _boundary(order, trajectory_id)
    if values is None:
        return None, None, None
    before = _beyond(keys, order, values, reverse=True)
    previous_id = before.values_list("pk", flat=True).first()
    next_id = _beyond(keys, order, values, reverse=False).values_list("pk", flat=True).first()
    in_queue = keys.filter(pk=trajectory_id).exists()
    position = before.order_by()[:position_limit].count() + 1 if in_queue else None
    return previous_id, next_id, position


def violation_codes(*, workspace_ids: Iterable[int]) -> list[str]:
    """The codes of the rules the workspaces' trajectories break (unfixed), for the queue's filter: read from the
    rollups of their domains, a few rows whatever the number of violations."""
    rows = rollup_rows(Figure.VIOLATION, workspace_ids=workspace_ids)
    return list(rows.values_list("label", flat=True).distinct().order_by("label"))


def queue_has(qs: QuerySet[Trajectory], trajectory_id: int) -> bool:
    return qs.filter(pk=trajectory_id).exists()


def queue_reviewable(qs: QuerySet[Trajectory], trajectory_id: int | None) -> Trajectory | None:
    """The trajectory, when it is in the queue and can be reviewed (the stream can start from it)."""
    if trajectory_id is None:
        return None
    return qs.filter(pk=trajectory_id, reviewable=True).only("pk").first()


def queue_selection(qs: QuerySet[Trajectory], ids: list[int] | None = None) -> QuerySet[Trajectory]:
    """A bulk action's items: the whole queue, or the `ids` chosen in it, unordered."""
    return (qs if ids is None else qs.filter(pk__in=ids)).order_by()


def next_free(*, queue, user, after_id: int, sort: str | None = None) -> int | None:
    """The id of the first item of `queue` after `after_id` (or from the head, when it left the queue) that
    nobody else holds: where a decision made outside the stream leads, without claiming it."""
    free = queue.filter(free_for(user)).exclude(pk=after_id)
    after = queue_after(free, after_id, sort) if queue.filter(pk=after_id).exists() else free
    return after.values_list("pk", flat=True).first() or free.values_list("pk", flat=True).first()


# A queue counts its items, and an item's place in it, up to here ("10,000+"): an exact count of a queue of a
# million reads every entry of its index on every page. Further pages are reached by Next. Read at call time.
QUEUE_COUNT_LIMIT = 10_000
# Parameters that move through the queue rather than filter it (and where a form returns to).
NAVIGATION = ("page", "after", "before", "stream", "full", "next", "second_look")


def queue_for(params, request=None, *, workspace_ids: Iterable[int]) -> tuple[TrajectoryFilter, QuerySet, str | None]:
    """The filtered, ordered queue of the workspaces `workspace_ids` for these parameters (the queue page's default
    status is `pending`), with its filterset and sort."""
    filterset = queue_filterset(params=params, request=request, workspace_ids=workspace_ids)
    sort = params.get("sort")
    return filterset, queue_ordered(filterset.qs, sort), sort


def filter_query(params) -> str:
    """The queue's filter and sort parameters, carried from the queue to the trajectory page and back."""
    params = params.copy()
    for name in NAVIGATION:
        params.pop(name, None)
    return params.urlencode()
