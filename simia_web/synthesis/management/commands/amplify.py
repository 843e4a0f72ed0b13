from django.core.management.base import BaseCommand

from simia_web.jobs.cli import job_queue_from_command, parameter_arguments
from simia_web.synthesis.amplify import STRATEGIES
from simia_web.synthesis.services import AMPLIFY

NUMBERS = ("count", "rng_seed", "min_messages", "max_messages")


class Command(BaseCommand):
    help = "Queue a Simia-SFT amplification job: exactly N new trajectories written from the usable seeds."

    def add_arguments(self, parser):
        parameter_arguments(parser, AMPLIFY, *NUMBERS)
        parser.add_argument("--domain", help="Only seeds of this domain.")
        parser.add_argument("--seed", type=int, action="append", dest="seed_ids", help="A seed id; repeat for more.")
        parser.add_argument("--strategy", choices=STRATEGIES, help="How seeds are chosen (default round_robin).")
        parser.add_argument("--wait", action="store_true", help="Show progress and a summary; fail if the job fails.")

    def handle(self, *args, **opts):
        names = (*NUMBERS, "domain", "seed_ids", "strategy")
        job_queue_from_command(self, kind=AMPLIFY, wait=opts["wait"], params={name: opts[name] for name in names})
