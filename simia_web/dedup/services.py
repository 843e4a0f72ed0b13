"""Writes to the near-duplicate index: signing an item as its text is written, clustering, and builds.

Clusters are formed greedily around representatives: an item joins the cluster of the oldest representative it is
a near-duplicate of (an unclustered neighbour counts as one, and the older of the two leads the new pair), so every
member of a cluster is a near-duplicate of its representative, and "keep one, reject the rest" never rejects an
item that merely chains to the kept one through others. An item whose text changes leaves its cluster and joins
again; when a representative changes, its former members are clustered again by a follow-up task.
"""

import functools
import heapq
import struct
import tempfile
from array import array
from collections.abc import Callable, Iterable

import numpy as np
from django.db import connection, transaction

from simia_web.accounts.models import owner_workspace_id
from simia_web.core.dispatch import task_send
from simia_web.core.errors import Conflict
from simia_web.core.rows import quoted_column, quoted_table, rows_insert
from simia_web.jobs.models import ACTIVE_JOB_STATUSES, Job
from simia_web.jobs.services import job_create

from .corpora import corpus_get
from .minhash import SIGNATURE_BYTES, THRESHOLD, band_keys, signature, signature_bytes, signature_load, similarity
from .models import Band, Signature
from .selectors import (
    CHUNK,
    ItemRange,
    Neighbour,
    index_minhashes,
    index_range_gone,
    index_range_signatures,
    index_range_unsigned,
    index_ranges,
    index_shared_buckets,
    joinable_neighbour,
)


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


# ---------------------------------------------------------------- builds
#
# A build re-derives the index of a corpus: each range of its items (selectors.index_ranges) is signed where it has
# no signature (every item, with `resign`) and has its bands written again from its signatures; then one merge
# clusters the whole corpus from the bands. The job kind (dedup.job_kinds) runs the ranges as units any worker
# takes and the merge as a final unit; index_build runs the same two steps here, over one range. Each step does its
# slow work first (reading texts, MinHash; reading bands, comparing) and returns the writer that writes what it
# found in one transaction: the job engine's unit-finish transaction, so a range redelivered or run twice at once
# is written once.

BUILD_JOB_KIND = "near-duplicates"
ITEMS_PER_RANGE = 10_000  # a build unit's items: 5 MB of signatures, 160k bands, a few seconds of one CPU
SPOOL_IN_MEMORY = 16 * 2**20  # a range's new signatures beyond this go to a temporary file
_SPOOLED = struct.Struct("<qq")  # item id, workspace id; then the signature's bytes


def _progress_noop(done: int) -> None:
    pass


class RangeWriter:
    """What signing a range found (its new signatures, spooled) and the writer of the range: signatures of items gone,
    of items signed again and of items whose text has no words go, the new ones are written, and every band of the
    range's signatures is written again, all with COPY on PostgreSQL."""

    def __init__(self, corpus: str, ids: ItemRange):
        self.corpus, self.ids = corpus, ids
        self.spool = tempfile.SpooledTemporaryFile(max_size=SPOOL_IN_MEMORY)  # noqa: SIM115 (closed by discard)
        self.signed = array("q")  # items with a new signature, as spooled
        self.wordless = array("q")  # items read whose text has no words

    def add(self, item_id: int, workspace_id: int, values: np.ndarray | None) -> None:
        if values is None:
            self.wordless.append(item_id)
            return
        self.spool.write(_SPOOLED.pack(item_id, workspace_id) + signature_bytes(values))
        self.signed.append(item_id)

    def _spooled(self, clusters: dict[int, int | None]):
        """The new signatures as rows, each keeping its item's cluster until the merge replaces them all."""
        self.spool.seek(0)
        record = _SPOOLED.size + SIGNATURE_BYTES
        while data := self.spool.read(record * CHUNK):
            for offset in range(0, len(data), record):
                item_id, workspace_id = _SPOOLED.unpack_from(data, offset)
                minhash = data[offset + _SPOOLED.size : offset + record]
                yield self.corpus, workspace_id, item_id, minhash, clusters.get(item_id)

    def __call__(self) -> dict:
        corpus, ids = self.corpus, self.ids
        gone = index_range_gone(corpus=corpus, ids=ids)
        in_range = Signature.objects.filter(ids.ids("item_id"), corpus=corpus)
        Band.objects.filter(signature__in=in_range).delete()  # no receivers: one DELETE
        dropped = _signatures_delete(corpus, [*gone, *self.wordless])
        clusters = dict(in_range.filter(cluster__isnull=False).values_list("item_id", "cluster"))
        _signatures_delete(corpus, list(self.signed))  # a new signature replaces the old (there is none without resign)
        _rows_copy(Signature, ("corpus", "workspace", "item_id", "minhash", "cluster"), self._spooled(clusters))
        banded, after = 0, None
        while batch := index_range_signatures(corpus=corpus, ids=ids, after=after, limit=10 * CHUNK):
            keys = (
                (key, pk)
                for _, pk, workspace_id, data in batch
                for key in band_keys(corpus, workspace_id, signature_load(data))
            )
            _rows_copy(Band, ("key", "signature"), keys)
            banded, after = banded + len(batch), batch[-1][0]
        self.discard()
        return {"signed": len(self.signed) + len(self.wordless), "signatures": banded, "dropped": dropped}

    def discard(self) -> None:
        self.spool.close()


def index_range_sign(*, corpus: str, ids: ItemRange, resign: bool = False, progress=_progress_noop) -> RangeWriter:
    """Read and sign the range's items without a signature (every one, with `resign`), and return the writer of the
    range (see RangeWriter). Reads only: nothing is written until the writer runs."""
    source = corpus_get(corpus)
    writer = RangeWriter(corpus, ids)
    try:
        for done, values in enumerate(index_range_unsigned(corpus=corpus, ids=ids, resign=resign), start=1):
            writer.add(values["pk"], values[source.workspace], signature(source.text(values)))
            if done % CHUNK == 0:
                progress(done)
    except BaseException:
        writer.discard()
        raise
    progress(len(writer.signed) + len(writer.wordless))
    return writer


def index_clusters_merge(*, corpus: str, progress=_progress_noop) -> Callable[[], dict]:
    """Cluster every item of `corpus` from its bands (no text is read), as if the items had been added one by one in
    id order, and return the writer that replaces the stored clusters in one transaction (pages show the old ones
    until then). Run once every range's bands are written."""
    buckets_of: dict[int, list[list[int]]] = {}
    for bucket in index_shared_buckets(corpus=corpus):
        for item_id in bucket:
            buckets_of.setdefault(item_id, []).append(bucket)
    progress(len(buckets_of))
    cluster_of = _clusters(corpus, buckets_of)

    def write() -> dict:
        _clusters_write(corpus, cluster_of)
        _statistics_refreshed()
        return {"clusters": len(set(cluster_of.values())), "clustered": len(cluster_of)}

    return write


def index_build(*, corpus: str, resign: bool = False, items_per_range: int | None = None, progress=None) -> dict:
    """Build the corpus's index in this process: the build job's plan (one range unless `items_per_range`), each
    step written in a transaction of its own. `progress(done, what)` hears of each step."""
    say = progress or (lambda done, what: None)
    results = []
    for ids in index_ranges(corpus=corpus, items_per_range=items_per_range):
        writer = index_range_sign(corpus=corpus, ids=ids, resign=resign, progress=lambda done: say(done, "signed"))
        try:
            with transaction.atomic():
                results.append(writer())
        finally:
            writer.discard()
        say(sum(result["signatures"] for result in results), "banded")
    merge = index_clusters_merge(corpus=corpus, progress=lambda done: say(done, "candidates"))
    with transaction.atomic():
        results.append(merge())
    say(results[-1]["clustered"], "clustered")
    return index_build_outcome(results)


def index_build_outcome(results: Iterable[dict]) -> dict:
    """What a build did, summed over its steps' results: items signed, signatures banded, signatures dropped (items
    gone, or without words), clusters and the items in them."""
    totals = dict.fromkeys(("signed", "signatures", "dropped", "clusters", "clustered"), 0)
    for result in results:
        for name in totals:
            totals[name] += result.get(name, 0)
    return totals


def index_build_queue(*, corpus: str, resign: bool = False, items_per_range: int = ITEMS_PER_RANGE, actor=None) -> Job:
    """Queue the build of the corpus's index as a job whose ranges of `items_per_range` items any worker takes. Refused
    (Conflict) while another build of the corpus is queued or running: two would rewrite the same ranges."""
    corpus_get(corpus)  # an unknown corpus fails here
    running = Job.objects.filter(kind=BUILD_JOB_KIND, params__corpus=corpus, status__in=ACTIVE_JOB_STATUSES).first()
    if running is not None:
        raise Conflict(f"Job {running.pk} is building the {corpus} index already; wait for it or cancel it.")
    params = {"corpus": corpus, "resign": resign, "items_per_range": items_per_range}
    return job_create(kind=BUILD_JOB_KIND, params=params, actor=actor)


def _signatures_delete(corpus: str, item_ids: list[int]) -> int:
    """Delete the items' signatures and their bands, CHUNK at a time, as SQL (Django's delete would load every row to
    cascade to its bands); returns how many signatures went."""
    deleted = 0
    item, signature_id = quoted_column(Signature, "item_id"), quoted_column(Signature, "id")
    for start in range(0, len(item_ids), CHUNK):
        chunk = item_ids[start : start + CHUNK]
        of_items = f"{quoted_column(Signature, 'corpus')} = %s AND {item} IN ({', '.join(['%s'] * len(chunk))})"
        with connection.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {quoted_table(Band)} WHERE {quoted_column(Band, 'signature')} IN "
                f"(SELECT {signature_id} FROM {quoted_table(Signature)} WHERE {of_items})",
                [corpus, *chunk],
            )
            cursor.execute(f"DELETE FROM {quoted_table(Signature)} WHERE {of_items}", [corpus, *chunk])
            deleted += cursor.rowcount
    return deleted


def _rows_copy(model, fields: tuple[str, ...], rows: Iterable[tuple]) -> None:
    """Write rows of `fields` (the rest take their column's default) with COPY on PostgreSQL, elsewhere in INSERTs of
    CHUNK rows."""
    columns = ", ".join(quoted_column(model, name) for name in fields)
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            with cursor.copy(f"COPY {quoted_table(model)} ({columns}) FROM STDIN") as copy:
                for row in rows:
                    copy.write_row(row)
            return
        sql = f"INSERT INTO {quoted_table(model)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
        batch = []
        for row in rows:
            batch.append(row)
            if len(batch) == CHUNK:
                cursor.executemany(sql, batch)
                batch = []
        if batch:
            cursor.executemany(sql, batch)


def _statistics_refreshed() -> None:
    """ANALYZE the index's tables on PostgreSQL once a build has rewritten them: until autovacuum comes by (never,
    where it is off) the planner reads a freshly built index with no statistics, and an item's write then scanned
    every band (30 ms against 4 to 5 ms)."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {quoted_table(Signature)}, {quoted_table(Band)}")


def _clusters_write(corpus: str, cluster_of: dict[int, int]) -> None:
    """Replace the corpus's clusters with `cluster_of` ({item: its representative}): on PostgreSQL one UPDATE per
    10 * CHUNK items from arrays, elsewhere one per representative and CHUNK members."""
    signatures = Signature.objects.filter(corpus=corpus)
    signatures.filter(cluster__isnull=False).update(cluster=None)
    items = sorted(cluster_of)
    if connection.vendor == "postgresql":
        sql = (
            f"UPDATE {quoted_table(Signature)} AS s SET {quoted_column(Signature, 'cluster')} = v.head "
            f"FROM unnest(%s::bigint[], %s::bigint[]) AS v(item, head) "
            f"WHERE s.{quoted_column(Signature, 'corpus')} = %s AND s.{quoted_column(Signature, 'item_id')} = v.item"
        )
        with connection.cursor() as cursor:
            for start in range(0, len(items), 10 * CHUNK):
                chunk = items[start : start + 10 * CHUNK]
                cursor.execute(sql, [chunk, [cluster_of[item] for item in chunk], corpus])
        return
    by_head: dict[int, list[int]] = {}
    for item_id in items:
        by_head.setdefault(cluster_of[item_id], []).append(item_id)
    for head, members in by_head.items():
        for start in range(0, len(members), CHUNK):
            signatures.filter(item_id__in=members[start : start + CHUNK]).update(cluster=head)


def _clusters(corpus: str, buckets_of: dict[int, list[list[int]]]) -> dict[int, int]:
    """{item: its representative} as item_index would have clustered the items added in id order: each item takes
    the oldest candidate that is a representative or unclustered and near-duplicate of it (see _cluster_choice).
    Candidates are walked in id order and the walk stops at the first that qualifies, so a text copied thousands
    of times costs each copy a few comparisons, not thousands."""
    ids = sorted(buckets_of)
    minhashes = index_minhashes(corpus=corpus, item_ids=ids)
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
