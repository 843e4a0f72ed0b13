"""Reads of the near-duplicate index: an item's near-duplicates, candidates for a text, clusters.

A lookup is one query whatever the size of the corpus: the item's band keys select, through the band table's
primary-key index, the signatures sharing any of them; each candidate's signature then verifies it against the
threshold. At most CANDIDATES_MAX candidates are read (the oldest first), so a text copied thousands of times costs
a bounded lookup; its cluster still holds every copy.
"""

import functools
from dataclasses import dataclass

import numpy as np
from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, F, OrderBy, Q, Window
from django.db.models.functions import RowNumber

from simia_web.core.rows import quoted_column, quoted_table

from .corpora import corpus_get
from .minhash import THRESHOLD, band_keys, signature, signature_load, similarity
from .models import Band, Signature

CANDIDATES_MAX = 500
CHUNK = 1000  # rows a build reads or writes at a time


@dataclass(frozen=True)
class Neighbour:
    item_id: int
    similarity: float
    cluster: int | None  # its cluster's representative


@dataclass(frozen=True)
class Lookup:
    """An indexed item's near-duplicates, most similar first; `capped` when more candidates were left unread."""

    item_id: int
    cluster: int | None
    neighbours: list[Neighbour]
    capped: bool


def _verified(minhash, rows, exclude: int | None) -> list[Neighbour]:
    found = []
    for item_id, data, cluster in rows:
        if item_id == exclude:
            continue
        score = similarity(minhash, signature_load(data))
        if score >= THRESHOLD:
            found.append(Neighbour(item_id, score, cluster))
    return sorted(found, key=lambda n: (-n.similarity, n.item_id))


def _rows(corpus: str, keys, first: int | None = None):
    """Signatures of `corpus` sharing a band key (`keys`: values or a subquery), `first` (when given) leading."""
    rows = Signature.objects.filter(corpus=corpus, pk__in=Band.objects.filter(key__in=keys).values("signature_id"))
    order: list[str | OrderBy] = ["item_id"]
    if first is not None:
        order.insert(0, ExpressionWrapper(~Q(item_id=first), output_field=BooleanField()).asc())
    return rows.order_by(*order).values_list("item_id", "minhash", "cluster")[: CANDIDATES_MAX + 1]


def near_duplicates(*, corpus: str, item_id: int) -> Lookup | None:
    """The item's near-duplicates in one query (its own signature comes first among them, as it shares every band
    with itself); None when the item is not indexed."""
    own_keys = Band.objects.filter(signature__corpus=corpus, signature__item_id=item_id).values("key")
    rows = list(_rows(corpus, own_keys, first=item_id))
    if not rows or rows[0][0] != item_id:
        return None
    _, data, cluster = rows[0]
    return Lookup(item_id, cluster, _verified(signature_load(data), rows[1:], item_id), len(rows) > CANDIDATES_MAX)


@functools.cache
def _joinable_sql(vendor: str, keys: int) -> str:
    """The signatures of a corpus sharing one of `keys` that lead a cluster or are in none, oldest first, as SQL
    written once: every item written makes this lookup, and building it through the ORM cost more CPU than the
    rest of the item's indexing (see core.rows)."""

    item, cluster = quoted_column(Signature, "item_id"), quoted_column(Signature, "cluster")
    in_band = (
        f"SELECT {quoted_column(Band, 'signature')} FROM {quoted_table(Band)} "
        f"WHERE {quoted_column(Band, 'key')} IN ({', '.join(['%s'] * keys)})"
    )
    return (
        f"SELECT {item}, {quoted_column(Signature, 'minhash')}, {cluster} "
        f"FROM {quoted_table(Signature)} WHERE {quoted_column(Signature, 'corpus')} = %s "
        f"AND ({cluster} IS NULL OR {cluster} = {item}) AND {quoted_column(Signature, 'id')} IN ({in_band}) "
        f"ORDER BY {item} LIMIT {CANDIDATES_MAX + 1}"
    )


def joinable_neighbour(
    *, corpus: str, workspace_id: int, minhash, exclude: int | None = None, keys: list[int] | None = None
) -> Neighbour | None:
    """The item an item with this signature joins (see services._cluster_choice): the oldest indexed item of `corpus`
    that leads a cluster or is in none and whose similarity reaches the threshold. Other clusters' members are not
    read, and candidates are compared oldest first until one passes: a text copied thousands of times costs a copy
    one comparison with its cluster's representative, not hundreds. `keys`: the signature's band keys, where the
    caller has them already."""
    keys = keys or band_keys(corpus, workspace_id, minhash)
    with connection.cursor() as cursor:
        cursor.execute(_joinable_sql(connection.vendor, len(keys)), [corpus, *keys])
        rows = cursor.fetchall()
    for item_id, data, cluster in rows:
        if item_id == exclude:
            continue
        score = similarity(minhash, signature_load(data))
        if score >= THRESHOLD:
            return Neighbour(item_id, score, cluster)
    return None


def text_candidates(*, corpus: str, workspace_id: int, text: str) -> list[int]:
    """Items of `corpus` in the workspace the index finds for a text not stored yet (sharing a band with it), for a
    caller that compares the texts themselves."""
    minhash = signature(text)
    if minhash is None:
        return []
    return [item_id for item_id, _, _ in _rows(corpus, band_keys(corpus, workspace_id, minhash))]


def cluster_heads(*, corpus: str, workspace_ids: list[int], after: int | None = None, limit: int = 25) -> list[int]:
    """Representatives of the workspaces' clusters, in id order, keyset-paged after `after` (the partial index's
    order)."""
    heads = Signature.objects.filter(corpus=corpus, cluster=F("item_id"), workspace_id__in=workspace_ids)
    if after is not None:
        heads = heads.filter(item_id__gt=after)
    return list(heads.order_by("item_id").values_list("item_id", flat=True)[:limit])


def clusters_first_members(*, corpus: str, heads: list[int], limit: int) -> dict[int, tuple[int, list[int]]]:
    """{representative: (cluster size, its first `limit` members in id order)} for a page of clusters, in one query."""
    ranked = (
        Signature.objects.filter(corpus=corpus, cluster__in=heads)
        .annotate(
            place=Window(RowNumber(), partition_by=F("cluster"), order_by=F("item_id").asc()),
            size=Window(Count("*"), partition_by=F("cluster")),
        )
        .filter(place__lte=limit)
        .order_by("cluster", "item_id")
        .values_list("cluster", "size", "item_id")
    )
    found: dict[int, tuple[int, list[int]]] = {}
    for head, size, item_id in ranked:
        if head is not None:  # every row is in one of `heads`
            found.setdefault(head, (size, []))[1].append(item_id)
    return found


# ---------------------------------------------------------------- builds


@dataclass(frozen=True)
class ItemRange:
    """Items of a corpus with ids in [low, high) (None: unbounded on that side), about `items` of them when planned."""

    low: int | None
    high: int | None
    items: int

    def ids(self, column: str) -> Q:
        bounds = Q()
        if self.low is not None:
            bounds &= Q(**{f"{column}__gte": self.low})
        if self.high is not None:
            bounds &= Q(**{f"{column}__lt": self.high})
        return bounds


def index_ranges(*, corpus: str, items_per_range: int | None) -> list[ItemRange]:
    """The corpus split into ranges of `items_per_range` items in id order (None: one range), a build's units. The
    first range is open below and the last above, so together they also hold signatures whose item is gone and
    items written after the plan."""
    items = corpus_get(corpus).queryset().order_by("pk").values_list("pk", flat=True)
    if items_per_range is None:
        return [ItemRange(None, None, items.count())]
    starts, count = [], 0
    for count, pk in enumerate(items.iterator(chunk_size=10_000), start=1):
        if count > 1 and (count - 1) % items_per_range == 0:
            starts.append(pk)
    bounds = [None, *starts, None]
    sizes = [items_per_range] * len(starts) + [count - items_per_range * len(starts)]
    return [ItemRange(low, high, size) for low, high, size in zip(bounds[:-1], bounds[1:], sizes, strict=True)]


def index_range_unsigned(*, corpus: str, ids: ItemRange, resign: bool):
    """(id, workspace id, text values) of the range's items to sign: those without a signature (every one, with
    `resign`), in id order, streamed."""
    source = corpus_get(corpus)
    items = source.queryset().filter(ids.ids("pk"))
    if not resign:
        signed = Signature.objects.filter(ids.ids("item_id"), corpus=corpus)
        items = items.exclude(pk__in=signed.values("item_id"))
    return items.order_by("pk").values("pk", source.workspace, *source.fields).iterator(chunk_size=CHUNK)


def index_range_gone(*, corpus: str, ids: ItemRange) -> list[int]:
    """Items of the range that have a signature but exist no more."""
    signed = Signature.objects.filter(ids.ids("item_id"), corpus=corpus)
    gone = signed.exclude(item_id__in=corpus_get(corpus).queryset().filter(ids.ids("pk")).values("pk"))
    return list(gone.values_list("item_id", flat=True))


def index_range_signatures(*, corpus: str, ids: ItemRange, after: int | None, limit: int) -> list[tuple]:
    """(item id, pk, workspace id, minhash) of the range's signatures after the item `after`, `limit` of them in item
    order."""
    rows = Signature.objects.filter(ids.ids("item_id"), corpus=corpus)
    if after is not None:
        rows = rows.filter(item_id__gt=after)
    return list(rows.order_by("item_id").values_list("item_id", "pk", "workspace_id", "minhash")[:limit])


def index_shared_buckets(*, corpus: str):
    """The items of `corpus` sharing each band key that more than one signature has, as sorted lists, streamed.

    One pass over the band table in its primary key's order counts each key's signatures (a window over the key, so
    nothing is sorted or hashed), and only shared keys come back; their signatures are then named by item, CHUNK at a
    time. Band keys hash their corpus, so a key is never shared across corpora; another corpus's buckets are dropped
    with its signatures."""
    counted = Band.objects.annotate(signatures=Window(Count("*"), partition_by=F("key")))
    rows = counted.filter(signatures__gt=1).order_by("key", "signature_id").values_list("key", "signature_id")
    current: int | None = None
    bucket: list[int] = []
    buckets: list[list[int]] = []
    for key, signature_id in rows.iterator(chunk_size=10 * CHUNK):
        if key != current:
            if bucket:
                buckets.append(bucket)
            current, bucket = key, []
        bucket.append(signature_id)
    if bucket:
        buckets.append(bucket)
    ids = sorted({signature_id for bucket in buckets for signature_id in bucket})
    item_of: dict[int, int] = {}
    signatures = Signature.objects.filter(corpus=corpus)
    for start in range(0, len(ids), CHUNK):
        item_of.update(signatures.filter(pk__in=ids[start : start + CHUNK]).values_list("pk", "item_id"))
    for bucket in buckets:
        items = sorted(item_of[signature_id] for signature_id in bucket if signature_id in item_of)
        if len(items) > 1:
            yield items


def index_minhashes(*, corpus: str, item_ids: list[int]) -> dict[int, np.ndarray]:
    """{item: its signature's values} for the items, read CHUNK at a time."""
    found: dict[int, np.ndarray] = {}
    for start in range(0, len(item_ids), CHUNK):
        rows = Signature.objects.filter(corpus=corpus, item_id__in=item_ids[start : start + CHUNK])
        found.update((item_id, signature_load(data)) for item_id, data in rows.values_list("item_id", "minhash"))
    return found
