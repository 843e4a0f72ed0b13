from django.core.management.base import BaseCommand

from simia_web.curation.rollups import rollups_rebuild


class Command(BaseCommand):
    help = (
        "Count the dashboard's and the agreement page's rollups again from every trajectory (after rows were "
        "written outside the services, e.g. restored from a dump)."
    )

    def handle(self, *args, **options):
        rows = rollups_rebuild()
        self.stdout.write(f"Rebuilt the rollups: {rows} rows.")
