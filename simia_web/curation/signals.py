"""What curation tells the layers above it, without knowing who listens."""

from django.dispatch import Signal

# People changed the status of trajectories (a review, a bulk review, an edit, a revert, an undo of a bulk action).
# Sent with `trajectory_ids` inside the transaction that changes them.
trajectory_statuses_changed = Signal()
