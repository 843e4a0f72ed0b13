"""The "rollups-rebuild" job kind: the rollups counted again from every trajectory, in units any worker takes.

Each unit is a group of whole domains (curation.rollups.rollups_units, about ROLLUP_UNIT_TRAJECTORIES trajectories):
it recounts their trajectories and reads their rollup rows in one snapshot, outside any write, and its writer adds
the difference to the rows in the transaction that marks it done (rollups_correction). A unit redelivered or run twice
at once adds it once; one whose worker died before that adds nothing and counts again. Writers carry on meanwhile,
and the rows come out as the single pass (manage.py rebuild_rollups) makes them. A cancelled job leaves the domains
its units had corrected corrected, the others as they were.
"""

from functools import partial

from simia_web.curation.rollups import ROLLUPS_JOB_KIND, rollups_correction, rollups_rows, rollups_units
from simia_web.jobs.kinds import JobKind, UnitPlan, job_kind_register
from simia_web.jobs.leases import unit_progress
from simia_web.jobs.selectors import units_results_summed

COUNT = "count"
COUNTS = ("domains", "trajectories", "rows_corrected")


@job_kind_register
class RollupsRebuildKind(JobKind):
    kind = ROLLUPS_JOB_KIND
    label = "Rollups rebuild"
    stages = (COUNT,)
    parameters = None  # queued by manage.py rebuild_rollups --queue (curation.rollups.rollups_rebuild_queue)

    def plan(self, job, stage):
        if stage is not None:
            return None
        groups = rollups_units(trajectories_per_unit=job.params["trajectories_per_unit"])
        return COUNT, [
            UnitPlan(COUNT, f"domains:{index:05d}", {"domains": group}) for index, group in enumerate(groups)
        ]

    def run(self, job, unit):
        domains = unit.params["domains"]
        named = f"domain {domains[0]}" if len(domains) == 1 else f"domains {domains[0]} to {domains[-1]}"
        progress = partial(
            unit_progress, unit.pk, what="trajectories counted", doing=f"Counting the rollups of {named}"
        )
        return rollups_correction(domain_ids=domains, progress=progress)

    def summary(self, job):
        return {**units_results_summed(job, COUNTS), "rows": rollups_rows()}
