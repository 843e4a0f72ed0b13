"""Consensus: items an assignment batch gave to k annotators under a rule are decided by their votes.

An assigned annotator's answer is a vote on the item's current version: kept (a Review of stage `vote`, never
standing) and leaving the item as it was, until the votes meet the rule. The vote that meets it is the decision that
stands (stage `consensus`, naming the votes it rests on), as the next version. Votes that split past the rule leave
the item awaiting review with the last vote standing as `disputed`, first in the reviewer queue; a reviewer's
decision adjudicates it. A change of the text (an edit, an undo) starts the vote again on the new version.

The rules (calibration.ConsensusRule): `majority` decides with more than half of the k votes and sends a tie to a
reviewer; `unanimous` decides when all k agree and sends any split to a reviewer once all k have voted; `adjudicate`
decides when all k agree and sends the item to a reviewer at the first vote that differs."""

from collections.abc import Iterable, Sequence

from django.db import transaction
from django.utils import timezone

from simia_web.accounts.models import Role
from simia_web.accounts.scoping import has_role_in
from simia_web.catalog.guidelines import guidelines_in_force
from simia_web.core.services import audit_record
from simia_web.curation.models import (
    STANDING,
    STATUS_FOR_DECISION,
    ConsensusItem,
    Decision,
    Review,
    ReviewStage,
    Trajectory,
    TrajectoryStatus,
)
from simia_web.curation.versions import version_advance, workspace_of

from .edits import _status_audit
from .holds import RELEASED, ReviewError

RULES = ("majority", "unanimous", "adjudicate")
# What the votes come to when they split past the rule.
DISPUTE = "dispute"


def consensus_outcome(rule: str, overlap: int, votes: Sequence[str]) -> str | None:
    """What the votes (accept or reject, one per voter) come to under `rule` with k = `overlap`: the decision they
    make, DISPUTE, or None while more votes are needed."""
    rejects = sum(1 for vote in votes if vote == Decision.REJECT)
    accepts = len(votes) - rejects
    complete = len(votes) >= overlap
    if rule == "majority":
        for decision, count in ((Decision.ACCEPT, accepts), (Decision.REJECT, rejects)):
            if 2 * count > overlap:
                return decision
        return DISPUTE if complete else None
    split = accepts and rejects
    if split and (rule == "adjudicate" or complete):
        return DISPUTE
    if complete:
        return Decision.REJECT if rejects else Decision.ACCEPT
    return None


def consensus_open(*, trajectory_ids: Iterable[int], rule: str, overlap: int, voters: dict[int, list], batch: int):
    """Put the items under `rule` over k = `overlap` votes of their assigned annotators (`voters`: {item: users});
    an item already under a rule takes the new one, its voters joined."""
    if rule not in RULES:
        raise ReviewError(f"no consensus rule {rule!r}; rules: {', '.join(RULES)}", field="consensus")
    with transaction.atomic():
        for pk in trajectory_ids:
            item, _ = ConsensusItem.objects.update_or_create(
                trajectory_id=pk, defaults={"rule": rule, "overlap": overlap, "batch": batch}
            )
            item.voters.add(*voters.get(pk, []))


def consensus_for(locked: Trajectory, person) -> ConsensusItem | None:
    """The consensus `person`'s answer on the trajectory is a vote in, or None: there is none, it is over (a decision
    stands on the item), or `person` is a reviewer or above (their decision adjudicates). Someone else below the
    reviewer role may not decide an item that awaits its voters."""
    item = ConsensusItem.objects.filter(trajectory_id=locked.pk).first()
    if item is None or has_role_in(person, workspace_of(locked), Role.REVIEWER):
        return None
    if Review.objects.filter(STANDING, trajectory_id=locked.pk).exists():
        return None
    if not item.voters.filter(pk=person.pk).exists():
        raise ReviewError(
            "This item is decided by the votes of the annotators it was assigned to, and you are not one of them.",
            field="decision",
        )
    return item


def consensus_vote(
    locked: Trajectory, item: ConsensusItem, *, voter, decision: str, reason: str, seen: int, domain_id: int
) -> Review:
    """Record `voter`'s vote on the locked trajectory's current version (replacing an earlier vote of theirs on it)
    and apply what the votes come to."""
    if decision == Decision.FIX_ACCEPT:
        raise ReviewError(
            "This item is decided by a vote: accept or reject it. A reviewer fixes it if the votes disagree.",
            field="decision",
        )
    now = timezone.now()
    votes = Review.objects.filter(
        trajectory_id=locked.pk,
        trajectory_version=locked.version,
        stage=ReviewStage.VOTE,
        undone_at__isnull=True,
        reviewer__in=item.voters.all(),
    )
    votes.filter(reviewer=voter).update(undone_at=now, undone_by=voter)  # a changed mind replaces the vote
    earlier = list(votes.exclude(reviewer=voter).values_list("pk", "decision"))
    outcome = consensus_outcome(item.rule, item.overlap, [d for _, d in earlier] + [decision])
    fields = {
        "trajectory": locked,
        "reviewer": voter,
        "decision": decision,
        "reason": reason,
        "based_on_version": seen,
        "sample": [pk for pk, _ in earlier],
        **guidelines_in_force(domain_id=domain_id).stamp,
    }
    if outcome is None:
        Trajectory.objects.filter(pk=locked.pk, reserved_by=voter).update(**RELEASED)
        vote = Review.objects.create(
            **fields, stage=ReviewStage.VOTE, trajectory_version=locked.version, superseded_at=now
        )
        audit_record(actor=voter, action="trajectory.vote", target=locked, data={"decision": decision})
        return vote
    previous = locked.status
    disputed = outcome == DISPUTE
    status = TrajectoryStatus.AWAITING_REVIEW if disputed else STATUS_FOR_DECISION[outcome]
    note = f"{item.rule} of {item.overlap}: " + ("votes disagree" if disputed else "consensus")
    version_advance(locked, actor=voter, action=decision, detail=note, status=status, **RELEASED)
    review = Review.objects.create(
        **fields,
        stage=ReviewStage.DISPUTED if disputed else ReviewStage.CONSENSUS,
        trajectory_version=locked.version,
        **({"domain_id": domain_id, "against_judge": False} if disputed else {}),
    )
    _status_audit(actor=voter, trajectory=locked, previous=previous, reason=note)
    return review
