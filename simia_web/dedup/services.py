"""Writes to the near-duplicate index: signing an item as its text is written, clustering, and rebuilding.

Clusters are formed greedily around representatives: an item joins the cluster of the oldest representative it is
a near-duplicate of (an unclustered neighbour counts as one, and the older of the two leads the new pair), so every
member of a cluster is a near-duplicate of its representative, and "keep one, reject the rest" never rejects an
item that merely chains to the kept one through others. An item whose text changes leaves its cluster and joins
again; when a representative changes, its former members are clustered again by a follow-up task.
"""

from collections.abc import Callable, Iterable

from django.db import transaction

from .corpora import corpus_get
from .minhash import THRESHOLD, band_keys, signature, signature_bytes, signature_load, similarity
from .models import Band, Signature
from .selectors import Neighbour, neighbours_of

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


def _join(corpus: str, item_id: int, neighbours: list[Neighbour]) -> None:
    clusters = {n.item_id: n.cluster for n in neighbours}
    choice = _cluster_choice(item_id, neighbours, clusters.get)
    if choice is not None:
        head, joining = choice
        Signature.objects.filter(corpus=corpus, item_id__in=joining).update(cluster=head)


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


def _bands(row: Signature, minhash) -> list[Band]:
    return [Band(key=key, signature=row) for key in band_keys(row.corpus, minhash)]


def item_index(*, corpus: str, item_id: int, text: str) -> None:
    """(Re)sign an item whose text was written, in the caller's transaction: its signature, its bands and its
    cluster. An unchanged text changes nothing; a text without words takes the item out of the index."""
    minhash = signature(text)
    data = signature_bytes(minhash) if minhash is not None else None
    with transaction.atomic(savepoint=False):  # all or nothing with the text it describes
        row = Signature.objects.select_for_update().filter(corpus=corpus, item_id=item_id).first()
        if row is not None and data is not None and bytes(row.minhash) == data:
            return
        left_behind = _leave(row) if row is not None else []
        if row is not None:
            row.delete()
        if minhash is not None:
            row = Signature.objects.create(corpus=corpus, item_id=item_id, minhash=data)
            Band.objects.bulk_create(_bands(row, minhash))
            _join(corpus, item_id, neighbours_of(corpus=corpus, minhash=minhash, exclude=item_id))
        if len(left_behind) > 1:
            transaction.on_commit(lambda: _recluster_later(corpus, left_behind), robust=True)


def _recluster_later(corpus: str, item_ids: list[int]) -> None:
    from .tasks import clusters_refresh

    clusters_refresh.delay(corpus, item_ids)


def clusters_refresh(*, corpus: str, item_ids: list[int]) -> None:
    """Cluster again items left without a representative, oldest first (each one that an earlier one took in
    stays where it is)."""
    for item_id in sorted(item_ids):
        with transaction.atomic():
            row = Signature.objects.select_for_update().filter(corpus=corpus, item_id=item_id).first()
            if row is None or row.cluster is not None:
                continue
            _join(corpus, item_id, neighbours_of(corpus=corpus, minhash=signature_load(row.minhash), exclude=item_id))


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
    for values in items.order_by("pk").values("pk", *source.fields).iterator(chunk_size=CHUNK):
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
            rows.append(Signature(corpus=corpus, item_id=values["pk"], minhash=signature_bytes(minhash)))
    with transaction.atomic():
        Signature.objects.filter(corpus=corpus, item_id__in=[values["pk"] for values in batch]).delete()
        Signature.objects.bulk_create(rows)
    return len(batch)


def _signatures(corpus: str):
    """(pk, item_id, minhash) of every signature of `corpus`, in item order, streamed."""
    rows = Signature.objects.filter(corpus=corpus).order_by("item_id").values_list("pk", "item_id", "minhash")
    return rows.iterator(chunk_size=CHUNK)


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
    added one by one in id order, with two indexed queries per thousand items, and written in one transaction at
    the end: pages show the old clusters until the new ones are complete."""
    done = 0
    for batch in _chunks(_signatures(corpus)):
        with transaction.atomic():
            Band.objects.filter(signature_id__in=[pk for pk, _, _ in batch]).delete()
            Band.objects.bulk_create(
                Band(key=key, signature_id=pk)
                for pk, _, data in batch
                for key in band_keys(corpus, signature_load(data))
            )
        done += len(batch)
        progress(done, "banded")
    cluster_of: dict[int, int] = {}
    done = 0
    for batch in _chunks(_signatures(corpus)):
        _batch_cluster(corpus, batch, cluster_of)
        done += len(batch)
        progress(done, "clustered")
    with transaction.atomic():
        Signature.objects.filter(corpus=corpus, cluster__isnull=False).update(cluster=None)
        by_head: dict[int, list[int]] = {}
        for item_id, head in cluster_of.items():
            by_head.setdefault(head, []).append(item_id)
        for head, members in by_head.items():
            for start in range(0, len(members), CHUNK):
                chunk = members[start : start + CHUNK]
                Signature.objects.filter(corpus=corpus, item_id__in=chunk).update(cluster=head)
    return {"signatures": done, "clusters": len(by_head), "clustered": len(cluster_of)}


def _batch_cluster(corpus: str, batch: list[tuple], cluster_of: dict[int, int]) -> None:
    """Cluster a batch of signatures in id order against everything indexed, with two queries for the batch."""
    keys_of: dict[int, list[int]] = {}
    minhashes = {}
    for _, item_id, data in batch:
        minhashes[item_id] = signature_load(data)
        keys_of[item_id] = band_keys(corpus, minhashes[item_id])
    all_keys = {key for keys in keys_of.values() for key in keys}
    sharing: dict[int, set[int]] = {}
    for key, item_id in Band.objects.filter(key__in=all_keys, signature__corpus=corpus).values_list(
        "key", "signature__item_id"
    ):
        sharing.setdefault(key, set()).add(item_id)
    wanted = {other for keys in keys_of.values() for key in keys for other in sharing.get(key, ())} - set(minhashes)
    others = Signature.objects.filter(corpus=corpus, item_id__in=wanted).values_list("item_id", "minhash")
    minhashes.update((item_id, signature_load(data)) for item_id, data in others.iterator(chunk_size=CHUNK))
    for item_id in sorted(keys_of):
        if item_id in cluster_of:
            continue
        candidates = {other for key in keys_of[item_id] for other in sharing.get(key, ())} - {item_id}
        mine = minhashes[item_id]
        neighbours = [
            Neighbour(other, score, None)
            for other in candidates
            if (score := similarity(mine, minhashes[other])) >= THRESHOLD
        ]
        choice = _cluster_choice(item_id, neighbours, cluster_of.get)
        if choice is not None:
            head, joining = choice
            cluster_of.update(dict.fromkeys(joining, head))
