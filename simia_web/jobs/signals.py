"""What the job engine tells the layers above it, without knowing who listens."""

from django.dispatch import Signal

# A job reached a final status (succeeded, finished with errors, failed, cancelled). Sent with `job` inside the
# transaction that ends it: receivers write in that transaction, and send anything outward after its commit.
job_ended = Signal()

# The watchdog took back the leases of `units` of `job`, held by `holders` without being started, and sent them again.
unit_leases_taken_back = Signal()

# The cluster's watchdog looked for lost work (one worker a beat, see jobs.services.jobs_heal): the layers above
# look for their own lost messages then.
watchdog_looked = Signal()
