from pathlib import Path

from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command
from simia_web.synthesis.services import SYNTHESIZE


class Command(BaseCommand):
    help = "Queue a domain-first synthesis job: APIs, tasks and K rollouts per task for each domain."

    def add_arguments(self, parser):
        parser.add_argument("--domain", action="append", required=True, help="Domain name; repeat for more.")
        parser.add_argument("--description", help="Description for new domains.")
        parser.add_argument("--policy-file", type=Path, help="Agent policy (Markdown) for new domains.")
        parser.add_argument("--apis", type=int, help="APIs per domain (default 8).")
        parser.add_argument("--tasks", type=int, help="Tasks per domain (default 10).")
        parser.add_argument("--rollouts", type=int, help="Rollouts per task (default 1).")
        parser.add_argument("--max-steps", type=int, help="Agent steps per rollout (default 12).")
        parser.add_argument("--max-errors", type=int, help="Tool errors before a rollout stops (default 3).")
        parser.add_argument("--user-turns", type=int, help="Extra turns by the simulated user (default 0).")
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        names = ("description", "apis", "tasks", "rollouts", "max_steps", "max_errors", "user_turns")
        params = {name: opts[name] for name in names}
        params["domains"] = opts["domain"]
        params["policy"] = opts["policy_file"].read_text(encoding="utf-8") if opts["policy_file"] else None
        job_queue_from_command(self, kind=SYNTHESIZE, wait=opts["wait"], params=params)
