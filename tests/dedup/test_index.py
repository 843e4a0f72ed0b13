"""The near-duplicate index: MinHash signatures kept as rows are written, lookups, clusters, and the rebuild."""

import random

import pytest
from django.core.management import call_command
from django.db import connection
from django.test.utils import CaptureQueriesContext

from simia_web.accounts.models import default_workspace_id
from simia_web.catalog.models import TaskStatus
from simia_web.catalog.services import domain_ensure, task_update, tasks_store
from simia_web.curation.duplicates import TRAJECTORIES, trajectory_duplicates
from simia_web.curation.models import Trajectory
from simia_web.curation.services import conversation_summary, trajectory_create, trajectory_edit
from simia_web.dedup import minhash
from simia_web.dedup.models import Band, Signature
from simia_web.dedup.selectors import near_duplicates
from simia_web.dedup.services import index_build, item_index
from simia_web.formats.rules import shingles
from tests.support.factories import TOOLS, conversation

WORDS = [
    "order",
    "refund",
    "shipment",
    "address",
    "invoice",
    "booking",
    "flight",
    "seat",
    "account",
    "balance",
    "transfer",
    "meeting",
    "invite",
    "plan",
]


def words(seed: int, n: int = 100) -> str:
    rng = random.Random(seed)
    return " ".join(rng.choice(WORDS) for _ in range(n))


def near(text: str, position: int = 7) -> str:
    """The text with one word changed: about 0.9 similar."""
    tokens = text.split()
    tokens[position] = "zeppelin"
    return " ".join(tokens)


def said(text: str) -> list[dict]:
    return conversation(text, "Done, your order is on its way.")


def make(text: str) -> Trajectory:
    return trajectory_create(
        violations=[], kind="rollout", domain=domain_ensure(name="shop"), messages=said(text), tools=TOOLS
    )


def cluster_of(trajectory: Trajectory) -> int | None:
    return Signature.objects.get(corpus=TRAJECTORIES, item_id=trajectory.pk).cluster


def test_the_banding_is_the_librarys_choice_for_the_threshold_weighted_towards_recall():
    assert (minhash.BANDS, minhash.ROWS, minhash.THRESHOLD) == (16, 8, 0.8)
    # The chance that a pair becomes a candidate: high at the threshold, tiny far below it.
    chance = lambda j: 1 - (1 - j**minhash.ROWS) ** minhash.BANDS  # noqa: E731
    assert chance(0.8) > 0.94 and chance(0.9) > 0.999 and chance(0.3) < 0.002


def test_a_near_copy_is_found_and_an_unrelated_conversation_is_not(db):
    text = words(1)
    original, copy, unrelated = make(text), make(near(text)), make(words(2))

    found = trajectory_duplicates(original.pk)
    assert [d["pk"] for d in found.shown] == [copy.pk] and found.count == 1
    assert 0.8 <= found.shown[0]["similarity"] < 1
    assert trajectory_duplicates(unrelated.pk).count == 0
    assert cluster_of(original) == cluster_of(copy) == original.pk and cluster_of(unrelated) is None
    assert Band.objects.filter(signature__item_id=original.pk).count() == minhash.BANDS


def test_a_lookup_is_one_query_and_a_page_of_near_duplicates_two(db, django_assert_num_queries):
    text = words(3)
    original = make(text)
    for position in range(5, 10):
        make(near(text, position))
    with django_assert_num_queries(1):
        found = near_duplicates(corpus=TRAJECTORIES, item_id=original.pk)
    assert len(found.neighbours) == 5
    with django_assert_num_queries(2):
        assert trajectory_duplicates(original.pk).count == 5


def test_an_edit_signs_the_new_text_and_the_cluster_follows(db, users):
    text = words(4)
    original, copy = make(text), make(near(text))
    assert cluster_of(copy) == original.pk

    trajectory_edit(trajectory=copy, editor=users["annotator"], messages=said(words(5)), expected_version=copy.version)
    assert trajectory_duplicates(copy.pk).count == 0 and trajectory_duplicates(original.pk).count == 0
    assert cluster_of(original) is None and cluster_of(copy) is None  # a cluster of one is none

    copy.refresh_from_db()
    trajectory_edit(
        trajectory=copy, editor=users["annotator"], messages=said(near(text, 9)), expected_version=copy.version
    )
    assert cluster_of(copy) == cluster_of(original) == original.pk


def test_an_unchanged_text_is_not_signed_again(db, users, django_assert_max_num_queries):
    original = make(words(6))
    signature_id = Signature.objects.get(item_id=original.pk).pk
    messages = said(words(6))
    messages[3]["content"] = '{"status": "cancelled", "note": "tool results are not compared"}'
    trajectory_edit(trajectory=original, editor=users["annotator"], messages=messages, expected_version=1)
    assert Signature.objects.get(item_id=original.pk).pk == signature_id


def test_members_left_by_a_representative_whose_text_changed_are_clustered_again(
    db, users, settings, django_capture_on_commit_callbacks
):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    text = words(7)
    head, second, third = make(text), make(near(text, 3)), make(near(text, 12))
    assert {cluster_of(t) for t in (head, second, third)} == {head.pk}

    with django_capture_on_commit_callbacks(execute=True) as callbacks:
        trajectory_edit(trajectory=head, editor=users["annotator"], messages=said(words(8)), expected_version=1)
    assert len(callbacks) >= 1
    assert cluster_of(head) is None
    assert cluster_of(second) == cluster_of(third) == second.pk


def test_a_new_item_is_signed_with_its_bands_in_one_statement(db):
    """On PostgreSQL the signature and its 16 band keys go in one INSERT; the lookup of an item to join follows."""
    text = words(41)
    with CaptureQueriesContext(connection) as queries:
        item_index(corpus=TRAJECTORIES, workspace_id=default_workspace_id(), item_id=10**9, text=text, new=True)
    expected = minhash.signature(text)
    row = Signature.objects.get(corpus=TRAJECTORIES, item_id=10**9)
    assert bytes(row.minhash) == minhash.signature_bytes(expected) and row.cluster is None
    keys = sorted(Band.objects.filter(signature=row).values_list("key", flat=True))
    assert keys == sorted(minhash.band_keys(TRAJECTORIES, row.workspace_id, expected)) and len(keys) == minhash.BANDS
    writes = [
        query["sql"]
        for query in queries.captured_queries
        if query["sql"].lstrip().upper().startswith(("INSERT", "WITH"))
    ]
    assert len(writes) == (1 if connection.vendor == "postgresql" else 2)


def test_a_conversation_without_words_is_not_indexed(db):
    empty = trajectory_create(
        violations=[],
        kind="rollout",
        domain=domain_ensure(name="shop"),
        messages=[],
        tools=[],
        termination_reason="llm_error",
    )
    assert not Signature.objects.filter(item_id=empty.pk).exists() and trajectory_duplicates(empty.pk) is None


def _unsigned(text: str) -> Trajectory:
    messages = said(text)
    return Trajectory.objects.create(
        kind="rollout",
        domain=domain_ensure(name="shop"),
        messages=messages,
        tools=TOOLS,
        **conversation_summary(messages=messages),
    )


def test_the_command_signs_what_has_no_signature_and_rebuilds_clusters_from_stored_signatures(db, capsys):
    text = words(9)
    rows = [_unsigned(text), _unsigned(near(text)), _unsigned(words(10)), _unsigned(near(text, 20))]
    assert not Signature.objects.exists()

    call_command("near_duplicates", "--corpus", TRAJECTORIES)
    assert '"signed": 4' in capsys.readouterr().out
    assert [cluster_of(t) for t in rows] == [rows[0].pk, rows[0].pk, None, rows[0].pk]

    # Rebuilt again from the signatures alone: no text is read, and the clusters come out the same.
    Signature.objects.update(cluster=None)
    Band.objects.all().delete()
    outcome = index_build(corpus=TRAJECTORIES)
    assert outcome["signed"] == 0 and outcome["signatures"] == 4  # every item had its signature: no text was read
    assert [cluster_of(t) for t in rows] == [rows[0].pk, rows[0].pk, None, rows[0].pk]
    assert trajectory_duplicates(rows[1].pk).count == 2


@pytest.mark.parametrize("resign", [False, True])
def test_signatures_of_items_gone_are_dropped_by_the_command(db, resign):
    kept, gone = make(words(11)), make(words(12))
    Trajectory.objects.filter(pk=gone.pk).delete()
    call_command("near_duplicates", "--corpus", TRAJECTORIES, *(["--resign"] if resign else []))
    assert list(Signature.objects.filter(corpus=TRAJECTORIES).values_list("item_id", flat=True)) == [kept.pk]


def test_synthesized_tasks_are_checked_through_the_index_and_edits_sign_again(db, users):
    domain = domain_ensure(name="shop")
    other = domain_ensure(name="air")
    instruction = "Cancel order W1 and refund the card ending in 4242 before Friday, then email the receipt."
    first, copy, unrelated = tasks_store(
        domain=domain,
        tasks=[
            {"instruction": instruction},
            {"instruction": instruction + " Thanks!"},
            {"instruction": "Book a window seat on the morning flight to Lisbon for two adults next week."},
        ],
    )
    assert first.status == unrelated.status == TaskStatus.VALID
    assert copy.status == TaskStatus.DUPLICATE and copy.duplicate_of_id == first.pk
    (elsewhere,) = tasks_store(domain=other, tasks=[{"instruction": instruction}])
    assert elsewhere.status == TaskStatus.VALID  # duplicates are looked for within a domain, as before

    task_update(task=unrelated, expected_version=unrelated.version, actor=users["curator"], instruction=instruction)
    (again,) = tasks_store(domain=domain, tasks=[{"instruction": "Hi. " + instruction}])
    assert again.status == TaskStatus.DUPLICATE and again.duplicate_of_id == first.pk
    assert Signature.objects.filter(corpus="task").count() == 5


def test_clusters_kept_as_items_are_written_equal_a_rebuild_of_the_same_items(db):
    """Writes cluster an item by reading only the candidates it could join, oldest first: the clusters come out
    as the rebuild (which clusters the items in id order) makes them, for copies, near copies and chains."""
    rng = random.Random(5)
    bases = [words(seed) for seed in range(20, 24)]
    texts = []
    for _ in range(36):
        base = rng.choice(bases)
        texts.append(rng.choice([base, near(base, rng.randrange(100)), near(near(base, 3), rng.randrange(100))]))
    texts += [words(seed) for seed in range(40, 44)]  # unrelated
    rows = [make(text) for text in texts]
    written = [cluster_of(t) for t in rows]
    assert len(set(written) - {None}) >= len(bases)

    Signature.objects.update(cluster=None)
    Band.objects.all().delete()
    index_build(corpus=TRAJECTORIES)
    assert [cluster_of(t) for t in rows] == written


@pytest.mark.django_db(transaction=True)
def test_signatures_stored_by_datasketch_become_bare_values_and_back():
    from datasketch import LeanMinHash, MinHash
    from django.db.migrations.executor import MigrationExecutor

    texts = {item_id: words(item_id, 40) for item_id in range(1, 6)}

    def lean_bytes(text: str) -> bytes:  # how 0001's signatures were written
        made = MinHash(num_perm=minhash.NUM_PERM, seed=minhash.SEED, scheme=minhash.SCHEME)
        made.update_batch([" ".join(token).encode() for token in shingles(text)])
        lean = LeanMinHash(made)
        buffer = bytearray(lean.bytesize())
        lean.serialize(buffer)
        return bytes(buffer)

    before, after = [("dedup", "0001_initial")], [("dedup", "0002_signature_raw_values")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps.get_model("dedup", "Signature")
        old.objects.bulk_create(old(corpus=TRAJECTORIES, item_id=i, minhash=lean_bytes(t)) for i, t in texts.items())
        MigrationExecutor(connection).migrate(after)
        stored = dict(Signature.objects.values_list("item_id", "minhash"))
        assert {i: bytes(data) for i, data in stored.items()} == {
            i: minhash.signature_bytes(minhash.signature(t)) for i, t in texts.items()
        }
        MigrationExecutor(connection).migrate(before)
        back = dict(old.objects.values_list("item_id", "minhash"))
        assert {i: bytes(data) for i, data in back.items()} == {i: lean_bytes(t) for i, t in texts.items()}
    finally:
        MigrationExecutor(connection).migrate(MigrationExecutor(connection).loader.graph.leaf_nodes())
