"""Every change a person makes to a trajectory is a version: the write names the version it was based on, takes
the row lock, and is refused when the row has moved on, naming what changed since and by whom."""

from django.utils import timezone

from simia_web.catalog.models import Domain
from simia_web.core.errors import VersionConflict

from .models import STANDING, Review, Trajectory, TrajectoryChange

# A refusal names this many of the changes it missed.
CHANGES_NAMED = 10


class StaleVersion(VersionConflict):
    """A write based on a version of a trajectory that has since moved on; `changes` says what moved it."""

    def __init__(self, trajectory: Trajectory, expected: int, changes: list[TrajectoryChange]):
        super().__init__(trajectory, expected)
        self.changes = changes

    def body(self) -> dict:
        """What changed after the version the writer named, and by whom (the API documents it as Conflict)."""
        return {**super().body(), "changes": [change_data(change) for change in self.changes]}

    def __str__(self) -> str:
        trajectory = self.obj
        if not self.changes:
            return f"Trajectory {trajectory.pk} is at version {trajectory.version}, not {self.expected}."
        named = ", ".join(change_text(change) for change in self.changes[:CHANGES_NAMED])
        more = " and more" if len(self.changes) > CHANGES_NAMED else ""
        return (
            f"Trajectory {trajectory.pk} changed after version {self.expected}, which you were working on: "
            f"{named}{more}. It is now version {trajectory.version}; nothing was overwritten."
        )


def change_data(change: TrajectoryChange) -> dict:
    return {
        "version": change.version,
        "action": change.action,
        "detail": change.detail,
        "actor": change.actor.username if change.actor else None,
        "created_at": change.created_at,
    }


def change_text(change: TrajectoryChange) -> str:
    who = change.actor.username if change.actor else "someone"
    detail = f" ({change.detail})" if change.detail else ""
    return f"v{change.version} {change.get_action_display()}{detail} by {who}"


def changes_since(trajectory_id: int, version: int) -> list[TrajectoryChange]:
    """The changes after `version`, oldest first (one more than a refusal names, to say there are more)."""
    rows = TrajectoryChange.objects.filter(trajectory_id=trajectory_id, version__gt=version).select_related("actor")
    return list(rows.order_by("version")[: CHANGES_NAMED + 1])


def stale(trajectory_id: int, expected: int) -> StaleVersion:
    current = Trajectory.objects.only("pk", "version").get(pk=trajectory_id)
    return StaleVersion(current, expected, changes_since(trajectory_id, expected))


def workspace_of(trajectory: Trajectory) -> int:
    """The id of the workspace that owns the trajectory (through its domain)."""
    return Domain.objects.filter(pk=trajectory.domain_id).values_list("workspace_id", flat=True).get()


def trajectory_locked(trajectory_id: int, expected_version: int) -> Trajectory:
    """The trajectory, locked for this transaction, if it is still at the version the writer was based on."""
    locked = Trajectory.objects.select_for_update().get(pk=trajectory_id)
    if locked.version != expected_version:
        raise StaleVersion(locked, expected_version, changes_since(trajectory_id, expected_version))
    return locked


def version_advance(locked: Trajectory, *, actor, action: str, detail: str = "", **fields) -> int:
    """Write `fields` as the next version with the change that made it (inside the caller's transaction).

    The UPDATE compares the version again, which keeps two writers apart where row locks do not exist (SQLite).
    """
    version = locked.version + 1
    fields.update(version=version, updated_at=timezone.now())
    if not Trajectory.objects.filter(pk=locked.pk, version=locked.version).update(**fields):
        raise stale(locked.pk, locked.version)
    TrajectoryChange.objects.create(trajectory=locked, version=version, action=action, actor=actor, detail=detail[:200])
    for name, value in fields.items():
        setattr(locked, name, value)
    return version


def decision_supersede(locked: Trajectory, actor) -> int:
    """The decision standing on the trajectory ends: its text or status is about to change under it."""
    return Review.objects.filter(STANDING, trajectory=locked).update(superseded_at=timezone.now(), superseded_by=actor)
