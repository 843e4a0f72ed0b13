from django.core.management.base import BaseCommand

from simia_web.llm.selectors import endpoint_status
from simia_web.synthesis.demo.loader import demo_load


class Command(BaseCommand):
    help = (
        "Load the demo domains (APIs, tasks, judged trajectories) unless they are already there; say whether an LLM "
        "endpoint is configured and where to set one."
    )

    def handle(self, *args, **opts):
        loaded = demo_load()
        self.stdout.write(f"Demo data: loaded {', '.join(loaded)}." if loaded else "Demo data: already loaded.")
        self.stdout.write(endpoint_status())
