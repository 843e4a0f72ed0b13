"""Count the rollups again from every trajectory.

manage.py rebuild_rollups          in this process, in one transaction that writers wait for
manage.py rebuild_rollups --queue  as a job whose units (groups of whole domains) the workers share, and wait for it

Both leave the same rows; with --queue writers carry on while it runs (curation.rollups).
"""

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from simia_web.core.errors import Conflict
from simia_web.curation.rollups import rollups_rebuild, rollups_rebuild_queue, rollups_rows
from simia_web.jobs.cli import job_wait


class Command(BaseCommand):
    help = (
        "Count the dashboard's and the agreement page's rollups again from every trajectory (after rows were "
        "written outside the services, e.g. restored from a dump)."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--queue", action="store_true", help="rebuild as a job on the workers (domains in parallel) and wait for it"
        )
        parser.add_argument(
            "--trajectories-per-unit",
            type=int,
            default=None,
            help="with --queue: trajectories a unit counts, whole domains at a time "
            f"(default SIMIA_ROLLUP_UNIT_TRAJECTORIES, {settings.ROLLUP_UNIT_TRAJECTORIES})",
        )

    def handle(self, *args, **options):
        try:
            if options["queue"]:
                per_unit = options["trajectories_per_unit"] or settings.ROLLUP_UNIT_TRAJECTORIES
                job_wait(rollups_rebuild_queue(trajectories_per_unit=max(1, per_unit)), self.stdout)
                rows = rollups_rows()
            else:
                rows = rollups_rebuild()
        except Conflict as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"Rebuilt the rollups: {rows} rows.")
