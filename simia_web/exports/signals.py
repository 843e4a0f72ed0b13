"""What the exports app tells the layers above it, without knowing who listens."""

from django.dispatch import Signal

# A snapshot's files are in place and its row records them. Sent with `snapshot_id` inside the transaction that
# records them (the export unit's): receivers write in it, and send anything outward after its commit.
snapshot_ready = Signal()
