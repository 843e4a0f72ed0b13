from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command
from simia_web.synthesis.amplify import STRATEGIES, amplification_queue
from simia_web.synthesis.rules import DEFAULT_MAX_MESSAGES, DEFAULT_MIN_MESSAGES


class Command(BaseCommand):
    help = "Queue a Simia-SFT amplification job: exactly N new trajectories written from the usable seeds."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, required=True, help="How many trajectories to write.")
        parser.add_argument("--domain", help="Only seeds of this domain.")
        parser.add_argument("--seed", type=int, action="append", dest="seeds", help="A seed id; repeat for more.")
        parser.add_argument("--strategy", choices=STRATEGIES, default="round_robin")
        parser.add_argument("--rng-seed", type=int, help="Seed of the random seed choice (recorded on the job).")
        parser.add_argument("--min-messages", type=int, default=DEFAULT_MIN_MESSAGES)
        parser.add_argument("--max-messages", type=int, default=DEFAULT_MAX_MESSAGES)
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        job_queue_from_command(
            self,
            amplification_queue,
            wait=opts["wait"],
            count=opts["count"],
            domain=opts["domain"],
            seed_ids=opts["seeds"],
            strategy=opts["strategy"],
            rng_seed=opts["rng_seed"],
            min_messages=opts["min_messages"],
            max_messages=opts["max_messages"],
        )
