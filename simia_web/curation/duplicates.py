"""Near-duplicate trajectories: the trajectory corpus of the near-duplicate index (dedup), and the reads of the
pages and exports that show or remove them. Every read here is bounded by a page, never by the dataset."""

from dataclasses import dataclass

from django.db.models import F, OuterRef, Subquery, Window
from django.db.models.functions import RowNumber

from simia_web.dedup import selectors as index
from simia_web.dedup.corpora import Corpus
from simia_web.dedup.models import Signature
from simia_web.formats.conversation import conversation_text

from .models import STANDING, Decision, Review, Trajectory

TRAJECTORIES = "trajectory"

CORPUS = Corpus(
    name=TRAJECTORIES,
    queryset=lambda: Trajectory.objects.all(),
    fields=("messages",),
    workspace="domain__workspace_id",
    text=lambda values: conversation_text(values["messages"] or []),
)

# What a cluster member shows: enough to choose the one to keep without opening it.
MEMBER_FIELDS = ("pk", "status", "judge_score", "preview", "domain__name", "kind", "reviewable")

SHOWN = 20  # near-duplicates listed on a trajectory's page


@dataclass
class TrajectoryDuplicates:
    count: int
    capped: bool  # more candidates than one lookup reads: `count` is a lower bound
    cluster: int | None
    shown: list[dict]  # the most similar, each a member row with its `similarity`


def trajectory_duplicates(trajectory_id: int) -> TrajectoryDuplicates | None:
    """A trajectory's near-duplicates in its workspace (two queries); None when it is not indexed (a text
    without words, or written before the index was built: see `manage.py near_duplicates`)."""
    found = index.near_duplicates(corpus=TRAJECTORIES, item_id=trajectory_id)
    if found is None:
        return None
    top = found.neighbours[:SHOWN]
    rows = {row["pk"]: row for row in Trajectory.objects.filter(pk__in=[n.item_id for n in top]).values(*MEMBER_FIELDS)}
    shown = [{**rows[n.item_id], "similarity": n.similarity} for n in top if n.item_id in rows]
    return TrajectoryDuplicates(len(found.neighbours), found.capped, found.cluster, shown)


def _accepted_at():
    """When the decision accepting the trajectory (standing) was made."""
    accepted = Review.objects.filter(
        STANDING, trajectory=OuterRef("pk"), decision__in=(Decision.ACCEPT, Decision.FIX_ACCEPT)
    )
    return Subquery(accepted.order_by("created_at").values("created_at")[:1])


# The member a cluster keeps, first in each order: accepted first (the earliest standing acceptance, then the highest
# judge score), or the highest judge score; the oldest among equals.
KEEP_ORDERS = {
    "accepted_first": (
        F("accepted_at").asc(nulls_last=True),
        F("judge_score").desc(nulls_last=True),
        F("pk").asc(),
    ),
    "highest_score": (F("judge_score").desc(nulls_last=True), F("pk").asc()),
}
KEEP_LABELS = {"accepted_first": "accepted first", "highest_score": "highest judge score"}


@dataclass
class Cluster:
    head: int
    size: int
    members: list[dict]  # member rows, in keep order (the first is the suggested one to keep)

    @property
    def suggested(self) -> int | None:
        return self.members[0]["pk"] if self.members else None


def _members(ids: list[int]) -> list[dict]:
    """Member rows in the suggested keep order (accepted first, then the highest judge score)."""
    rows = Trajectory.objects.filter(pk__in=ids).annotate(accepted_at=_accepted_at())
    return list(rows.order_by(*KEEP_ORDERS["accepted_first"]).values(*MEMBER_FIELDS, "accepted_at"))


def clusters_page(*, workspace_ids: list[int], after: int | None, limit: int, members_shown: int) -> list[Cluster]:
    """A keyset page of the workspaces' clusters (by representative), each with its size and its first
    `members_shown` members: three queries."""
    heads = index.cluster_heads(corpus=TRAJECTORIES, workspace_ids=workspace_ids, after=after, limit=limit)
    found = index.clusters_first_members(corpus=TRAJECTORIES, heads=heads, limit=members_shown)
    rows = _members([pk for _, ids in found.values() for pk in ids])
    clusters = []
    for head in heads:
        size, ids = found.get(head, (0, []))
        clusters.append(Cluster(head, size, [row for row in rows if row["pk"] in ids]))
    return clusters


def cluster_of_workspace(*, workspace_ids: list[int], head: int) -> bool:
    """Whether `head` is a trajectory the workspaces' index holds (every member of its cluster is theirs too)."""
    return Signature.objects.filter(corpus=TRAJECTORIES, item_id=head, workspace_id__in=workspace_ids).exists()


def cluster_detail(*, workspace_ids: list[int], head: int, limit: int) -> Cluster | None:
    """One cluster of the workspaces with its first `limit` members (the representative always among them); None
    when it has fewer than two members (it is no cluster, or no longer one) or is another workspace's."""
    if not cluster_of_workspace(workspace_ids=workspace_ids, head=head):
        return None
    size, ids = index.clusters_first_members(corpus=TRAJECTORIES, heads=[head], limit=limit).get(head, (0, []))
    if size < 2:
        return None
    if head not in ids:
        ids = [head, *ids[:-1]]
    return Cluster(head, size, _members(ids))


def cluster_member_ids(*, head: int, among: list[int]) -> list[int]:
    """Which of `among` are in the cluster now (a page's list may be older than the index)."""
    clustered = Signature.objects.filter(corpus=TRAJECTORIES, cluster=head, item_id__in=among)
    return list(clustered.values_list("item_id", flat=True))


def near_duplicates_to_drop(queryset, keep: str):
    """The trajectories of `queryset` that an export keeping one per cluster leaves out: all but the first of each
    cluster's members in `queryset`, in the KEEP_ORDERS[keep] order. A queryset of ids."""
    cluster = Signature.objects.filter(corpus=TRAJECTORIES, item_id=OuterRef("pk")).values("cluster")[:1]
    ranked = (
        queryset.annotate(near_cluster=Subquery(cluster), accepted_at=_accepted_at())
        .filter(near_cluster__isnull=False)
        .annotate(
            near_rank=Window(RowNumber(), partition_by=F("near_cluster"), order_by=KEEP_ORDERS[keep]),
        )
    )
    return ranked.filter(near_rank__gt=1).values_list("pk", flat=True)


def not_indexed(queryset):
    """Trajectories of `queryset` the index does not hold (never signed, or without words)."""
    return queryset.exclude(pk__in=Signature.objects.filter(corpus=TRAJECTORIES).values("item_id"))
