from pathlib import Path

from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command
from simia_web.synthesis.services import synthesis_queue


class Command(BaseCommand):
    help = "Queue a domain-first synthesis job: APIs, tasks and K rollouts per task for each domain."

    def add_arguments(self, parser):
        parser.add_argument("--domain", action="append", required=True, help="Domain name; repeat for more.")
        parser.add_argument("--description", default="", help="Description for new domains.")
        parser.add_argument("--policy-file", type=Path, help="Agent policy (Markdown) for new domains.")
        parser.add_argument("--apis", type=int, default=8)
        parser.add_argument("--tasks", type=int, default=10)
        parser.add_argument("--rollouts", type=int, default=1)
        parser.add_argument("--max-steps", type=int, default=12)
        parser.add_argument("--max-errors", type=int, default=3)
        parser.add_argument("--user-turns", type=int, default=0, help="Extra turns by the simulated user.")
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        policy = opts["policy_file"].read_text(encoding="utf-8") if opts["policy_file"] else ""
        job_queue_from_command(
            self,
            synthesis_queue,
            wait=opts["wait"],
            description=opts["description"],
            policy=policy,
            domains=opts["domain"],
            apis=opts["apis"],
            tasks=opts["tasks"],
            rollouts=opts["rollouts"],
            max_steps=opts["max_steps"],
            max_errors=opts["max_errors"],
            user_turns=opts["user_turns"],
        )
