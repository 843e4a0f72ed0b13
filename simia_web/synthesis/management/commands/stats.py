import json

from django.core.management.base import BaseCommand

from simia_web.synthesis.selectors import stats


class Command(BaseCommand):
    help = "Counts of domains, APIs, tasks, seeds, trajectories by status and jobs by status."

    def add_arguments(self, parser):
        parser.add_argument("--json", action="store_true", help="Print JSON (the default is a table).")

    def handle(self, *args, **opts):
        data = stats()
        if opts["json"]:
            self.stdout.write(json.dumps(data, sort_keys=True))
            return
        for key, value in data.items():
            if isinstance(value, dict):
                self.stdout.write(f"{key}:")
                for sub, n in sorted(value.items()):
                    self.stdout.write(f"  {sub:<14} {n}")
            else:
                self.stdout.write(f"{key:<16} {value}")
