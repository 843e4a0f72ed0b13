from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command, parameter_arguments
from simia_web.synthesis.services import ENVIRONMENTS, ROLLOUT

NUMBERS = ("tasks", "rollouts", "max_steps", "max_errors", "user_turns")


class Command(BaseCommand):
    help = "Queue K rollouts on each of a domain's existing valid tasks."

    def add_arguments(self, parser):
        parser.add_argument("--domain", required=True)
        parameter_arguments(parser, ROLLOUT, *NUMBERS)
        parser.add_argument(
            "--environment", choices=ENVIRONMENTS, help="What answers the tool calls (default: the simulator)."
        )
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        params = {
            "domain": opts["domain"],
            "environment": opts["environment"],
            **{name: opts[name] for name in NUMBERS},
        }
        job_queue_from_command(self, kind=ROLLOUT, wait=opts["wait"], params=params)
