"""Random sequences of decisions, second looks (confirm, overturn, fix and confirm), bulk confirmations on a sample,
undos, guideline changes, send-backs, gold items (marked with or without expected ratings, and answered) and
consensus rules (majority, unanimous or adjudicate over two annotators' votes, drawn per item) by two annotators,
a reviewer and a curator with the reviewer stage on (and walks of votes alone, where consensus is met or disputed
and adjudicated most of the time). After every step an item is accepted or rejected only under a decision that
needed no second look, settled one, or that votes meeting their rule made, at its version; it awaits review exactly
while an annotator's decision awaits or votes disagree; every decision names the guidelines in force when it was
made. At the end of each walk
nothing of a gold item (that it is gold, its expected answer, explanation or ratings) reaches anyone below the
curator role who has not answered it, on its page or over REST; the export holds exactly the accepted items' texts;
and the rollups equal a recount. SIMIA_FUZZ_EXAMPLES raises the number of runs."""

import contextlib
import json
import os

import pytest
from django.db import transaction
from django.test import Client
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from simia_web.accounts.models import Workspace, default_workspace_id
from simia_web.accounts.services import user_create, workspace_review_stage_set
from simia_web.catalog.guidelines import guidelines_in_force, guidelines_save
from simia_web.core.errors import HeldByOther
from simia_web.curation.models import (
    STANDING,
    ConsensusItem,
    Decision,
    GoldItem,
    Review,
    ReviewStage,
    Trajectory,
    TrajectoryStatus,
)
from simia_web.curation.selectors.second_look import awaiting_batches
from simia_web.curation.services import (
    STATUS_FOR_DECISION,
    ReviewError,
    gold_mark,
    review_decide,
    review_undo,
    reviews_confirm_rest,
    reviews_send_back,
)
from simia_web.curation.services.consensus import RULES as CONSENSUS_RULES
from simia_web.curation.services.consensus import consensus_open, consensus_outcome
from simia_web.curation.versions import StaleVersion
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import export_write
from tests.conftest import PASSWORD
from tests.curation.test_rollups import assert_rollups_equal_a_recount
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db

PEOPLE = ("annotator", "annotator2", "reviewer", "curator")
OPERATIONS = (
    "accept",
    "reject",
    "fix",
    "undo",
    "guidelines",
    "confirm_rest",
    "send_back",
    "gold",
    "gold_rated",
)
# Who answers gold items (anyone below the curator role) and must learn nothing of one before answering it.
ANSWERERS = ("annotator", "annotator2", "reviewer")
VOTERS = ("annotator", "annotator2")
STEPS = st.lists(
    st.tuples(st.sampled_from(PEOPLE), st.sampled_from(OPERATIONS), st.integers(0, 2)), min_size=1, max_size=12
)
REFUSED = (StaleVersion, HeldByOther, ReviewError)


def _step(items, users, person: str, operation: str, index: int, counter: list[int]) -> None:
    user, item = users[person], Trajectory.objects.get(pk=items[index].pk)
    counter[0] += 1
    if operation in ("accept", "reject"):
        review_decide(trajectory=item, reviewer=user, decision=operation, expected_version=item.version, reason="why")
    elif operation == "fix":
        messages = json.loads(json.dumps(item.messages))
        messages[-1] = {"role": "assistant", "content": f"fixed {counter[0]}"}
        review_decide(
            trajectory=item,
            reviewer=user,
            decision=Decision.FIX_ACCEPT,
            expected_version=item.version,
            messages=messages,
            reason="why",
        )
    elif operation == "undo":
        standing = Review.objects.filter(STANDING, trajectory=item).first()
        if standing is not None:
            review_undo(review=standing, actor=user)
    elif operation == "guidelines":
        current = guidelines_in_force(domain_id=item.domain_id)
        guidelines_save(
            workspace_id=default_workspace_id(),
            domain=None,
            text=f"rule {counter[0]}",
            expected_version=current.version or 0,
            actor=users["curator"],
        )
    elif operation == "confirm_rest":
        for batch in awaiting_batches(workspace_ids=[default_workspace_id()]):
            reviews_confirm_rest(
                annotator_id=batch.annotator_id,
                reviewer=users["reviewer"],
                sample=batch.sample,
                workspace_ids=[default_workspace_id()],
            )
    elif operation == "send_back":
        reviews_send_back(trajectories=Trajectory.objects.filter(pk=item.pk), actor=users["curator"])
    elif operation in ("gold", "gold_rated"):
        gold_mark(
            trajectory=item,
            expected_decision=Decision.REJECT if counter[0] % 2 else Decision.ACCEPT,
            expected_scores={"policy_followed": 0.2, "task_completed": 0.9} if operation == "gold_rated" else None,
            explanation=f"explained-{counter[0]}",
            actor=users["curator"],
        )


def _check(items, newer_than: int) -> list:
    """The invariants of one item after a step; returns the accepted items' texts."""
    accepted_texts = []
    for item in items:
        t = Trajectory.objects.get(pk=item.pk)
        standing = list(Review.objects.filter(STANDING, trajectory=t))
        assert len(standing) <= 1
        if t.status == TrajectoryStatus.AWAITING_REVIEW:
            assert standing and standing[0].stage in ("awaiting", "disputed")
        elif t.status in (TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED):
            # Accepted or rejected only under a decision that needed no second look or settled one, or that votes
            # meeting their rule made.
            assert standing and standing[0].stage in ("", "consensus") and standing[0].trajectory_version == t.version
            assert STATUS_FOR_DECISION[standing[0].decision] == t.status
        else:
            assert not standing
        if standing and standing[0].stage in ("consensus", "disputed"):
            # The votes it rests on, on the version voted on, come to what it says under the item's rule.
            rule = ConsensusItem.objects.get(trajectory=t)
            votes = list(Review.objects.filter(pk__in=standing[0].sample).values_list("decision", "based_on_version"))
            assert all(version == standing[0].based_on_version for _, version in votes)
            outcome = consensus_outcome(rule.rule, rule.overlap, [d for d, _ in votes] + [standing[0].decision])
            assert outcome == ("dispute" if standing[0].stage == "disputed" else standing[0].decision)
        if t.status == TrajectoryStatus.ACCEPTED:
            accepted_texts.append(t.messages)
    for review in Review.objects.filter(pk__gt=newer_than).select_related("trajectory"):
        stamp = guidelines_in_force(domain_id=review.trajectory.domain_id).stamp
        assert (review.guidelines_id, review.guidelines_version) == tuple(stamp.values()), review.pk
    return accepted_texts


def _gold_hidden(items, users, clients: dict[str, Client]) -> None:
    """Nobody below the curator role who has not answered a gold item learns anything of it: neither its page, nor
    its REST detail, nor the REST list says it is gold, or shows its expected answer, explanation or ratings. Pages
    are slow reads, so this runs where a walk ends: walks of every length are drawn, so what one meets midway
    another ends on."""
    golds = dict(GoldItem.objects.filter(trajectory__in=items).values_list("trajectory_id", "explanation"))
    for person in ANSWERERS:
        answered = set(
            Review.objects.filter(reviewer=users[person], stage=ReviewStage.GOLD).values_list(
                "trajectory_id", flat=True
            )
        )
        hidden = {pk: why for pk, why in golds.items() if pk not in answered}
        if not hidden:
            continue
        client = clients[person]
        reads = [client.get("/api/v1/trajectories/")]
        for pk in hidden:
            reads += [client.get(f"/trajectories/{pk}/"), client.get(f"/api/v1/trajectories/{pk}/")]
        for read in reads:
            assert read.status_code == 200
            text = read.content.decode()
            assert "gold" not in text.lower() and "expected" not in text.lower(), (person, read.request["PATH_INFO"])
            assert not any(why in text for why in hidden.values()), (person, read.request["PATH_INFO"])


def _check_exported(accepted_texts: list, tmp_path) -> None:
    """The export holds the accepted texts and nothing else; the rollups equal a recount."""
    path = tmp_path / "accepted.jsonl"
    export_write(format="openai", filters=export_filters_clean({}), path=path)
    exported = [json.loads(line)["messages"] for line in path.read_text().splitlines()]
    assert len(exported) == len(accepted_texts)
    assert sorted(m[-1]["content"] for m in exported) == sorted(m[-1]["content"] for m in accepted_texts)
    assert_rollups_equal_a_recount()


VOTING_STEPS = st.lists(
    st.tuples(
        st.sampled_from(("annotator", "annotator2", "reviewer")),
        st.sampled_from(("accept", "reject", "reject", "accept", "undo", "fix")),
        st.integers(0, 2),
    ),
    min_size=2,
    max_size=12,
)
RULES_PER_ITEM = st.lists(st.sampled_from([None, *CONSENSUS_RULES]), min_size=3, max_size=3)


def test_reviewer_stage_invariants_hold_over_random_work(users, tmp_path):
    _walks(users, tmp_path, STEPS)


def test_the_same_invariants_hold_over_random_votes(users, tmp_path):
    _walks(users, tmp_path, VOTING_STEPS)


def _walks(users, tmp_path, steps_drawn) -> None:
    users = {**users, "annotator2": user_create(username="annotator2", role="annotator", password=PASSWORD)}
    clients = {person: Client() for person in ANSWERERS}
    for person, client in clients.items():
        client.force_login(users[person])

    @given(steps=steps_drawn, rules=RULES_PER_ITEM)
    @settings(
        max_examples=int(os.environ.get("SIMIA_FUZZ_EXAMPLES", "10")),
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    def run(steps, rules):
        with transaction.atomic():
            workspace_review_stage_set(workspace=Workspace.objects.get(slug="default"), on=True, actor=None)
            items = [make_trajectory(judge=verdict(passed=passed)) for passed in (False, True, True)]
            for batch, (item, rule) in enumerate(zip(items, rules, strict=True)):
                if rule is not None:  # the item is decided by the two annotators' votes under the rule
                    voters = {item.pk: [users[name] for name in VOTERS]}
                    consensus_open(trajectory_ids=[item.pk], rule=rule, overlap=2, voters=voters, batch=batch)
            counter, accepted_texts = [0], []
            for person, operation, index in steps:
                newest = Review.objects.order_by("-pk").values_list("pk", flat=True).first() or 0
                with contextlib.suppress(REFUSED):
                    _step(items, users, person, operation, index, counter)
                accepted_texts = _check(items, newest)
            _gold_hidden(items, users, clients)
            _check_exported(accepted_texts, tmp_path)
            transaction.set_rollback(True)

    run()
