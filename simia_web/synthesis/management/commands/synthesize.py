from pathlib import Path

from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command, parameter_arguments
from simia_web.synthesis.services import SYNTHESIZE

NUMBERS = ("apis", "tasks", "rollouts", "max_steps", "max_errors", "user_turns")


class Command(BaseCommand):
    help = "Queue a domain-first synthesis job: APIs, tasks and K rollouts per task for each domain."

    def add_arguments(self, parser):
        parser.add_argument("--domain", action="append", required=True, help="Domain name; repeat for more.")
        parser.add_argument("--description", help="Description for new domains.")
        parser.add_argument("--policy-file", type=Path, help="Agent policy (Markdown) for new domains.")
        parameter_arguments(parser, SYNTHESIZE, *NUMBERS)
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        params = {name: opts[name] for name in NUMBERS}
        params["domains"] = opts["domain"]
        params["description"] = opts["description"]
        params["policy"] = opts["policy_file"].read_text(encoding="utf-8") if opts["policy_file"] else None
        job_queue_from_command(self, kind=SYNTHESIZE, wait=opts["wait"], params=params)
