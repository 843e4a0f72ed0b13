"""Writes to the near-duplicate index: signing an item as its text is written, clustering, and rebuilding.

Clusters are formed greedily around representatives: an item joins the cluster of the oldest representative it is
a near-duplicate of (an unclustered neighbour counts as one, and the older of the two leads the new pair), so every
member of a cluster is a near-duplicate of its representative, and "keep one, reject the rest" never rejects an
item that merely chains to the kept one through others. An item whose text changes leaves its cluster and joins
again; when a representative changes, its former members are clustered again by a follow-up task.
"""

import functools
import heapq
from collections.abc import Callable, Iterable

import numpy as np
from django.db import connection, transaction

from simia_web.accounts.models import owner_workspace_id
from simia_web.core.dispatch import task_send
from simia_web.core.rows import quoted_column, quoted_table, rows_insert

from .corpora import corpus_get
from .minhash import THRESHOLD, band_keys, signature, signature_bytes, signature_load, similarity
from .models import Band, Signature
from .selectors import Neighbour, joinable_neighbour

CHUNK = 1000


def _cluster_choice(item_id: int, neighbours: Iterable[Neighbour], cluster_of: Callable[[int], int | None]):
    """(representative, items whose cluster it becomes) for an item joining: the oldest neighbour that is a
    representative or in no cluster leads, and an unclustered one forms a pair with the item, led by the older of
    the two. None when every neighbour is a member of someone else's cluster."""
    heads = [n.item_id for n in neighbours if cluster_of(n.item_id) in (None, n.item_id)]
    if not heads:
        return None
    other = min(heads)
    if cluster_of(other) is None:
        return min(other, item_id), {other, item_id}
    return other, {item_id}


def _join(corpus: str, item_id: int, neighbour: Neighbour | None) -> None:
    """Put the item in the cluster of the neighbour it joins (joinable_neighbour), or pair it with it."""
    if neighbour is None:
        return
    choice = _cluster_choice(item_id, [neighbour], {neighbour.item_id: neighbour.cluster}.get)
    if choice is not None:
        head, joining = choice
        with connection.cursor() as cursor:
            cursor.execute(_cluster_set_sql(connection.vendor, len(joining)), [head, corpus, *joining])


@functools.cache
def _cluster_set_sql(vendor: str, items: int) -> str:
    """Signature.objects.filter(corpus=..., item_id__in=...).update(cluster=...) as SQL written once, for _join
    (see core.rows): every item written makes it when it finds a neighbour."""
    return (
        f"UPDATE {quoted_table(Signature)} SET {quoted_column(Signature, 'cluster')} = %s "
        f"WHERE {quoted_column(Signature, 'corpus')} = %s AND {quoted_column(Signature, 'item_id')} "
        f"IN ({', '.join(['%s'] * items)})"
    )


def _leave(row: Signature) -> list[int]:
    """Take the item out of its cluster; returns the members a departing representative leaves behind."""
    if row.cluster is None:
        return []
    Signature.objects.filter(pk=row.pk).update(cluster=None)
    others = Signature.objects.filter(corpus=row.corpus, cluster=row.cluster).exclude(pk=row.pk)
    if row.cluster != row.item_id:
        if not others.exclude(item_id=row.cluster).exists():  # the representative is alone now
            others.update(cluster=None)
        return []
    members = list(others.order_by("item_id").values_list("item_id", flat=True))
    others.update(cluster=None)
    return members


def _signature_insert(corpus: str, workspace_id: int, item_id: int, data: bytes, keys: list[int]) -> None:
    """Write a new item's signature and its bands, as fixed SQL (core.rows): every trajectory a job writes is signed
    here, in its unit's transaction. On PostgreSQL one statement writes both, the band keys as one array."""
    if connection.vendor != "postgresql":
        row = rows_insert([Signature(corpus=corpus, workspace_id=workspace_id, item_id=item_id, minhash=data)])[0]
        rows_insert([Band(key=key, signature=row) for key in keys])
        return
    with connection.cursor() as cursor:
        cursor.execute(_signature_insert_sql(), [corpus, workspace_id, item_id, data, keys])


@functools.cache
def _signature_insert_sql() -> str:
    signature_id = quoted_column(Signature, "id")
    return (
        f"WITH new AS (INSERT INTO {quoted_table(Signature)} ({quoted_column(Signature, 'corpus')}, "
        f"{quoted_column(Signature, 'workspace')}, {quoted_column(Signature, 'item_id')}, "
        f"{quoted_column(Signature, 'minhash')}) VALUES (%s, %s, %s, %s) "
        f"RETURNING {signature_id}) "
        f"INSERT INTO {quoted_table(Band)} ({quoted_column(Band, 'key')}, {quoted_column(Band, 'signature')}) "
        f"SELECT band.key, new.{signature_id} FROM new, unnest(%s::bigint[]) AS band(key)"
    )


def item_index(*, corpus: str, workspace_id: int, item_id: int, text: str, new: bool = False) -> None:
    """(Re)sign an item of the workspace `workspace_id` whose text was written, in the caller's transaction: its
    signature, its bands and its cluster (among that workspace's items only). An unchanged text changes nothing;
    a text without words takes the item out of the index. `new`: the item was just created, so there is no
    signature to replace (one query fewer on the pipelines' write path)."""
    minhash = signature(text)
    data = signature_bytes(minhash) if minhash is not None else None
    with transaction.atomic(savepoint=False):  # all or nothing with the text it describes
        row = None if new else Signature.objects.select_for_update().filter(corpus=corpus, item_id=item_id).first()
        if row is not None and data is not None and bytes(row.minhash) == data:
            return
        left_behind = _leave(row) if row is not None else []
        if row is not None:
            row.delete()
        if minhash is not None and data is not None:
            keys = band_keys(corpus, workspace_id, minhash)
            _signature_insert(corpus, workspace_id, item_id, data, keys)
            neighbour = joinable_neighbour(
                corpus=corpus, workspace_id=workspace_id, minhash=minhash, exclude=item_id, keys=keys
            )
            _join(corpus, item_id, neighbour)
        if len(left_behind) > 1:
            transaction.on_commit(lambda: _recluster_later(corpus, left_behind), robust=True)


def _recluster_later(corpus: str, item_ids: list[int]) -> None:
    task_send("simia_web.dedup.tasks.clusters_refresh", (corpus, item_ids))


def clusters_refresh(*, corpus: str, item_ids: list[int]) -> None:
    """Cluster again items left without a representative, oldest first (each one that an earlier one took in
    stays where it is)."""
    for item_id in sorted(item_ids):
        with transaction.atomic():
            row = Signature.objects.select_for_update().filter(corpus=corpus, item_id=item_id).first()
            if row is None or row.cluster is not None:
                continue
            neighbour = joinable_neighbour(
                corpus=corpus,
                workspace_id=owner_workspace_id(row),
                minhash=signature_load(row.minhash),
                exclude=item_id,
            )
            _join(corpus, item_id, neighbour)


# ---------------------------------------------------------------- rebuild


def _progress_noop(done: int, what: str) -> None:
    pass


def index_sign_missing(*, corpus: str, resign: bool = False, progress=_progress_noop) -> int:
    """Sign the items that have no signature (every item, with `resign`), reading their text a chunk at a time;
    signatures of items that no longer exist go. Bands and clusters are left to index_rebuild."""
    source = corpus_get(corpus)
    signed = Signature.objects.filter(corpus=corpus)
    signed.exclude(item_id__in=source.queryset().values("pk")).delete()
    items = source.queryset()
    if not resign:
        items = items.exclude(pk__in=signed.values("item_id"))
    done, batch = 0, []
    for values in items.order_by("pk").values("pk", source.workspace, *source.fields).iterator(chunk_size=CHUNK):
        batch.append(values)
        if len(batch) == CHUNK:
            done += _signatures_write(corpus, source, batch)
            progress(done, "signed")
            batch = []
    done += _signatures_write(corpus, source, batch)
    progress(done, "signed")
    return done


def _signatures_write(corpus: str, source, batch: list[dict]) -> int:
    rows = []
    for values in batch:
        minhash = signature(source.text(values))
        if minhash is not None:
            workspace_id = values[source.workspace]
            rows.append(
                Signature(
                    corpus=corpus, workspace_id=workspace_id, item_id=values["pk"], minhash=signature_bytes(minhash)
                )
            )
    with transaction.atomic():
        Signature.objects.filter(corpus=corpus, item_id__in=[values["pk"] for values in batch]).delete()
        Signature.objects.bulk_create(rows)
    return len(batch)


def _signatures(corpus: str):
    """(pk, item_id, workspace_id, minhash) of every signature of `corpus`, in item order, streamed."""
    signatures = Signature.objects.filter(corpus=corpus).order_by("item_id")
    return signatures.values_list("pk", "item_id", "workspace_id", "minhash").iterator(chunk_size=CHUNK)


def _chunks(rows):
    batch = []
    for row in rows:
        batch.append(row)
        if len(batch) == CHUNK:
            yield batch
            batch = []
    if batch:
        yield batch


def index_rebuild(*, corpus: str, progress=_progress_noop) -> dict:
    """Re-derive every band and every cluster of `corpus` from the stored signatures (no text is read).

    Bands are replaced a chunk at a time, so lookups keep working. Clusters are computed as if the items had been
    added one by one in id order, from one pass over the band table in key order (its primary key), and written in
    one transaction at the end: pages show the old clusters until the new ones are complete."""
    done = 0
    item_of: dict[int, int] = {}  # signature pk -> item id
    for batch in _chunks(_signatures(corpus)):
        with transaction.atomic():
            Band.objects.filter(signature_id__in=[pk for pk, _, _, _ in batch]).delete()
            Band.objects.bulk_create(
                Band(key=key, signature_id=pk)
                for pk, _, workspace_id, data in batch
                for key in band_keys(corpus, workspace_id, signature_load(data))
            )
        item_of.update((pk, item_id) for pk, item_id, _, _ in batch)
        done += len(batch)
        progress(done, "banded")
    buckets_of = _shared_buckets(item_of)
    cluster_of = _clusters(corpus, buckets_of)
    progress(done, "clustered")
    by_head: dict[int, list[int]] = {}
    for item_id, head in cluster_of.items():
        by_head.setdefault(head, []).append(item_id)
    with transaction.atomic():
        Signature.objects.filter(corpus=corpus, cluster__isnull=False).update(cluster=None)
        for head, members in by_head.items():
            for start in range(0, len(members), CHUNK):
                chunk = members[start : start + CHUNK]
                Signature.objects.filter(corpus=corpus, item_id__in=chunk).update(cluster=head)
    return {"signatures": done, "clusters": len(by_head), "clustered": len(cluster_of)}


def _shared_buckets(item_of: dict[int, int]) -> dict[int, list[list[int]]]:
    """{item: the sorted lists of items sharing one of its band keys}, for items of this corpus (`item_of` maps its
    signatures to their items) sharing any key: the band table read once in key order, only shared keys kept."""
    buckets_of: dict[int, list[list[int]]] = {}

    def keep(bucket: list[int]) -> None:
        if len(bucket) > 1:
            bucket.sort()
            for item_id in bucket:
                buckets_of.setdefault(item_id, []).append(bucket)

    current: int | None = None
    bucket: list[int] = []
    rows = Band.objects.order_by("key").values_list("key", "signature_id").iterator(chunk_size=10 * CHUNK)
    for key, signature_id in rows:
        if key != current:
            keep(bucket)
            current, bucket = key, []
        if signature_id in item_of:
            bucket.append(item_of[signature_id])
    keep(bucket)
    return buckets_of


def _clusters(corpus: str, buckets_of: dict[int, list[list[int]]]) -> dict[int, int]:
    """{item: its representative} as item_index would have clustered the items added in id order: each item takes
    the oldest candidate that is a representative or unclustered and near-duplicate of it (see _cluster_choice).
    Candidates are walked in id order and the walk stops at the first that qualifies, so a text copied thousands
    of times costs each copy a few comparisons, not thousands."""
    minhashes: dict[int, np.ndarray] = {}
    ids = sorted(buckets_of)
    for start in range(0, len(ids), CHUNK):
        rows = Signature.objects.filter(corpus=corpus, item_id__in=ids[start : start + CHUNK])
        minhashes.update((item_id, signature_load(data)) for item_id, data in rows.values_list("item_id", "minhash"))
    cluster_of: dict[int, int] = {}
    for item_id in ids:
        if item_id in cluster_of:
            continue
        previous = None
        for other in heapq.merge(*buckets_of[item_id]):
            if other in (previous, item_id):
                continue
            previous = other
            if cluster_of.get(other) not in (None, other):
                continue
            score = similarity(minhashes[item_id], minhashes[other])
            if score >= THRESHOLD:
                neighbour = Neighbour(other, score, cluster_of.get(other))
                head, joining = _cluster_choice(item_id, [neighbour], cluster_of.get)
                cluster_of.update(dict.fromkeys(joining, head))
                break
    return cluster_of
