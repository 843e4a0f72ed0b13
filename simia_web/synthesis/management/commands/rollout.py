from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command
from simia_web.synthesis.services import rollout_queue


class Command(BaseCommand):
    help = "Queue K rollouts on each of a domain's existing valid tasks."

    def add_arguments(self, parser):
        parser.add_argument("--domain", required=True)
        parser.add_argument("--tasks", type=int, default=None, help="Use only the first N valid tasks.")
        parser.add_argument("--rollouts", type=int, default=1)
        parser.add_argument("--max-steps", type=int, default=12)
        parser.add_argument("--max-errors", type=int, default=3)
        parser.add_argument("--user-turns", type=int, default=0)
        parser.add_argument("--wait", action="store_true")

    def handle(self, *args, **opts):
        job_queue_from_command(
            self,
            rollout_queue,
            wait=opts["wait"],
            domain=opts["domain"],
            tasks=opts["tasks"],
            rollouts=opts["rollouts"],
            max_steps=opts["max_steps"],
            max_errors=opts["max_errors"],
            user_turns=opts["user_turns"],
        )
