"""Random sequences of edits, fixes, decisions, reverts, undos, holds and bulk actions by two people, each working
from what they last looked at: after every step an item is accepted only while its text is the one a person
accepted, exactly one decision stands on every decided item (at the item's version), and the OpenAI export writes
exactly the accepted texts, each passing the strict normaliser. SIMIA_FUZZ_EXAMPLES raises the number of runs."""

import contextlib
import json
import os
from dataclasses import dataclass, field

import pytest
from django.db import transaction
from hypothesis import HealthCheck, Phase, example, given, settings
from hypothesis import strategies as st

from simia_web.accounts.models import default_workspace_id
from simia_web.core.errors import HeldByOther
from simia_web.curation.gate import messages_written
from simia_web.curation.models import STANDING, Review, Trajectory, TrajectoryStatus
from simia_web.curation.services import (
    STATUS_FOR_DECISION,
    ReviewError,
    review_decide,
    review_undo,
    reviews_bulk,
    reviews_bulk_undo,
    trajectory_edit,
    trajectory_hold,
    trajectory_release,
    trajectory_revert,
)
from simia_web.curation.versions import StaleVersion
from simia_web.exports.selectors import export_filters_clean
from simia_web.exports.services import export_write
from simia_web.formats.conversation import messages_strict
from simia_web.formats.openai import canonical_to_openai
from tests.support.factories import make_trajectory, verdict

pytestmark = pytest.mark.django_db

PEOPLE = ("annotator", "curator")
# Each operation with its weight: reverts, fixes and undos are the moves that used to leave "accepted" behind.
OPERATIONS = {
    "look": 1,
    "accept": 2,
    "reject": 1,
    "fix": 2,
    "edit": 1,
    "revert": 3,
    "undo": 2,
    "hold": 1,
    "release": 1,
    "bulk_accept": 1,
    "bulk_reject": 1,
    "bulk_undo": 1,
}
# (who, what, which item, a version to revert to, whether they reload the page first)
STEPS = st.lists(
    st.tuples(
        st.sampled_from(PEOPLE),
        st.sampled_from([name for name, weight in OPERATIONS.items() for _ in range(weight)]),
        st.integers(0, 1),
        st.integers(1, 8),
        st.booleans(),
    ),
    min_size=1,
    max_size=16,
)
REFUSED = (StaleVersion, HeldByOther, ReviewError)  # a stale view, someone else's hold, nothing to undo or revert


@dataclass
class World:
    """The items, what each person last looked at, and what a person accepted of each item (None: nothing)."""

    items: list
    views: dict = field(default_factory=dict)  # (person, item index) -> (version, messages)
    accepted: dict = field(default_factory=dict)  # item index -> messages a person accepted
    batch: object = None
    fixes: int = 0

    def look(self, person: str, index: int) -> None:
        t = Trajectory.objects.get(pk=self.items[index].pk)
        self.views[person, index] = (t.version, t.messages)


def _rewritten(messages: list, text: str) -> list:
    messages = json.loads(json.dumps(messages))
    messages[-1] = {"role": "assistant", "content": text}
    return messages


def _step(world: World, users: dict, person: str, operation: str, index: int, number: int, fresh: bool) -> None:
    user, item = users[person], world.items[index]
    if fresh:
        world.look(person, index)
    version, seen = world.views[person, index]
    if operation == "look":
        world.look(person, index)
    elif operation in ("accept", "reject"):
        review_decide(trajectory=item, reviewer=user, decision=operation, expected_version=version, reason="no")
        world.accepted[index] = seen if operation == "accept" else None
    elif operation in ("fix", "edit"):
        world.fixes += 1
        messages = _rewritten(seen, f"{operation} number {world.fixes}")
        if operation == "fix":
            review_decide(
                trajectory=item, reviewer=user, decision="fix_accept", expected_version=version, messages=messages
            )
            world.accepted[index] = messages_written(messages, item.tools)
        else:
            trajectory_edit(trajectory=item, editor=user, messages=messages, expected_version=version)
            world.accepted[index] = None
    elif operation == "revert":
        trajectory_revert(trajectory=item, to_version=number % version + 1, expected_version=version, actor=user)
        world.accepted[index] = None
    elif operation == "undo":
        standing = Review.objects.filter(STANDING, trajectory=item).first()
        if standing is None:
            return
        review_undo(review=standing, actor=user)
        world.accepted[index] = None
    elif operation == "hold":
        trajectory_hold(trajectory=item, user=user)
    elif operation == "release":
        trajectory_release(trajectory_id=item.pk, user=user)
    elif operation.startswith("bulk_"):
        _bulk(world, users["curator"], operation)
        return
    if operation not in ("look", "hold", "release"):
        world.look(person, index)  # a person sees the page their own write led to


def _bulk(world: World, curator, operation: str) -> None:
    before = {i: Trajectory.objects.get(pk=t.pk) for i, t in enumerate(world.items)}
    if operation == "bulk_undo":
        if world.batch is None:
            return
        reviews_bulk_undo(batch=world.batch, actor=curator, workspace_ids=[default_workspace_id()])
    else:
        decision = operation.removeprefix("bulk_")
        everything = Trajectory.objects.filter(pk__in=[t.pk for t in world.items])
        outcome = reviews_bulk(trajectories=everything, reviewer=curator, decision=decision, reason="batch")
        world.batch = outcome.batch or world.batch
    for i, old in before.items():
        if Trajectory.objects.get(pk=old.pk).version != old.version:  # this one was changed by the bulk action
            world.accepted[i] = old.messages if operation == "bulk_accept" else None


def _check(world: World, tmp_path) -> None:
    exported_expected = []
    for i, item in enumerate(world.items):
        t = Trajectory.objects.get(pk=item.pk)
        standing = list(Review.objects.filter(STANDING, trajectory=t))
        assert len(standing) <= 1, f"item {i}: {len(standing)} decisions stand"
        if t.status in (TrajectoryStatus.ACCEPTED, TrajectoryStatus.REJECTED):
            assert standing, f"item {i} is {t.status} with no decision standing"
            assert standing[0].trajectory_version == t.version
            assert STATUS_FOR_DECISION[standing[0].decision] == t.status
        else:
            assert not standing, f"item {i} is {t.status} under a standing {standing[0].decision}"
        accepted = world.accepted.get(i)
        assert (t.status == TrajectoryStatus.ACCEPTED) == (accepted is not None), (i, t.status)
        if accepted is not None:
            assert t.messages == accepted, f"item {i} is accepted with text nobody accepted"
            exported_expected.append(canonical_to_openai(accepted, t.tools))
    path = tmp_path / "accepted.jsonl"
    export_write(format="openai", filters=export_filters_clean({}), path=path)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    for record in records:
        messages_strict(record["messages"])

    def key(record):
        return json.dumps({"messages": record["messages"], "tools": record["tools"]}, sort_keys=True)

    assert sorted(map(key, records)) == sorted(map(key, exported_expected))


def test_only_accepted_versions_are_accepted_and_exported(users, tmp_path):
    @given(steps=STEPS)
    # The walks that lost decisions before: a revert under a curator's fix, a fix started before someone's accept,
    # an undo of a bulk accept after one item was decided again.
    @example(steps=[("curator", "fix", 0, 1, True), ("annotator", "revert", 0, 0, True)])
    @example(steps=[("curator", "accept", 0, 1, True), ("annotator", "fix", 0, 1, False)])
    @example(
        steps=[
            ("curator", "bulk_accept", 0, 1, False),
            ("annotator", "reject", 1, 1, True),
            ("curator", "bulk_undo", 0, 1, False),
        ]
    )
    @settings(
        max_examples=int(os.environ.get("SIMIA_FUZZ_EXAMPLES", "40")),
        deadline=None,
        database=None,
        phases=[Phase.explicit, Phase.generate, Phase.shrink],
        suppress_health_check=list(HealthCheck),
    )
    def run(steps):
        with transaction.atomic():
            world = World(items=[make_trajectory(judge=verdict(passed=passed)) for passed in (False, True)])
            for person in PEOPLE:
                for index in range(len(world.items)):
                    world.look(person, index)
            # Both start with a history to go back to: the first fixed and accepted, the second edited.
            _step(world, users, "curator", "fix", 0, 1, True)
            _step(world, users, "curator", "edit", 1, 1, True)
            _check(world, tmp_path)
            for person, operation, index, number, fresh in steps:
                with contextlib.suppress(REFUSED):
                    _step(world, users, person, operation, index, number, fresh)
                _check(world, tmp_path)
            transaction.set_rollback(True)

    run()
