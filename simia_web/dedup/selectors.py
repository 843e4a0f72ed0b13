"""Reads of the near-duplicate index: an item's near-duplicates, candidates for a text, clusters.

A lookup is one query whatever the size of the corpus: the item's band keys select, through the band table's
primary-key index, the signatures sharing any of them; each candidate's signature then verifies it against the
threshold. At most CANDIDATES_MAX candidates are read (the oldest first), so a text copied thousands of times costs
a bounded lookup; its cluster still holds every copy.
"""

import functools
from dataclasses import dataclass

from django.db import connection
from django.db.models import BooleanField, Count, ExpressionWrapper, F, OrderBy, Q, Window
from django.db.models.functions import RowNumber

from simia_web.core.rows import quoted_column, quoted_table

from .minhash import THRESHOLD, band_keys, signature, signature_load, similarity
from .models import Band, Signature

CANDIDATES_MAX = 500


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


def cluster_heads(
    *, corpus: str, workspace_ids: list[int], after: int | None = None, limit: int = 25
) -> list[int]:
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
