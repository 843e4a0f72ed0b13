from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command
from simia_web.synthesis.services import ROLLOUT


class Command(BaseCommand):
    help = "Queue K rollouts on each of a domain's existing valid tasks."

    def add_arguments(self, parser):
        parser.add_argument("--domain", required=True)
        parser.add_argument("--tasks", type=int, help="Use only the first N valid tasks (default: all).")
        parser.add_argument("--rollouts", type=int, help="Rollouts per task (default 1).")
        parser.add_argument("--max-steps", type=int, help="Agent steps per rollout (default 12).")
        parser.add_argument("--max-errors", type=int, help="Tool errors before a rollout stops (default 3).")
        parser.add_argument("--user-turns", type=int, help="Extra turns by the simulated user (default 0).")
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        names = ("domain", "tasks", "rollouts", "max_steps", "max_errors", "user_turns")
        job_queue_from_command(self, kind=ROLLOUT, wait=opts["wait"], params={name: opts[name] for name in names})
