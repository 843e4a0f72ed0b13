from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command
from simia_web.synthesis.amplify import STRATEGIES
from simia_web.synthesis.services import AMPLIFY


class Command(BaseCommand):
    help = "Queue a Simia-SFT amplification job: exactly N new trajectories written from the usable seeds."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, required=True, help="How many trajectories to write.")
        parser.add_argument("--domain", help="Only seeds of this domain.")
        parser.add_argument("--seed", type=int, action="append", dest="seed_ids", help="A seed id; repeat for more.")
        parser.add_argument("--strategy", choices=STRATEGIES, help="How seeds are chosen (default round_robin).")
        parser.add_argument("--rng-seed", type=int, help="Seed of the random seed choice (recorded on the job).")
        parser.add_argument("--min-messages", type=int, help="Fewest messages an output may have.")
        parser.add_argument("--max-messages", type=int, help="Most messages an output may have.")
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        names = ("count", "domain", "seed_ids", "strategy", "rng_seed", "min_messages", "max_messages")
        job_queue_from_command(self, kind=AMPLIFY, wait=opts["wait"], params={name: opts[name] for name in names})
