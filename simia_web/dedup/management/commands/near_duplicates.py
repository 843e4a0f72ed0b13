"""Build or rebuild the near-duplicate index.

manage.py near_duplicates                  sign what has no signature yet, then re-derive bands and clusters
manage.py near_duplicates --resign         read every text again (after a change to how texts are compared)
manage.py near_duplicates --corpus task    one corpus only (default: all)
manage.py near_duplicates --queue          as a job whose ranges of items the workers share, and wait for it

Without --queue the build runs in this process, one range over the whole corpus; with it, each range of
--items-per-range items is a unit any worker takes, and a final unit clusters the corpus. Both give the same index.
"""

import json
import time

from django.core.management.base import BaseCommand, CommandError

from simia_web.core.errors import Conflict
from simia_web.dedup.corpora import corpus_names
from simia_web.dedup.services import ITEMS_PER_RANGE, index_build, index_build_outcome, index_build_queue
from simia_web.jobs.cli import job_wait


class Command(BaseCommand):
    help = "Sign unsigned items and rebuild the near-duplicate index's bands and clusters from stored signatures."

    def add_arguments(self, parser):
        parser.add_argument("--corpus", choices=corpus_names(), action="append", help="default: every corpus")
        parser.add_argument("--resign", action="store_true", help="sign every item again from its text")
        parser.add_argument(
            "--queue", action="store_true", help="build as a job on the workers (ranges in parallel) and wait for it"
        )
        parser.add_argument(
            "--items-per-range",
            type=int,
            default=ITEMS_PER_RANGE,
            help=f"with --queue: items a unit signs (default {ITEMS_PER_RANGE})",
        )

    def handle(self, *args, **options):
        report = {}
        for corpus in options["corpus"] or corpus_names():
            started = time.perf_counter()
            if options["queue"]:
                try:
                    job = index_build_queue(
                        corpus=corpus, resign=options["resign"], items_per_range=max(1, options["items_per_range"])
                    )
                except Conflict as exc:
                    raise CommandError(str(exc)) from None
                job = job_wait(job, self.stderr)
                outcome = {"job": job.pk, **index_build_outcome([job.summary])}
            else:

                def progress(done: int, what: str, corpus=corpus) -> None:
                    self.stderr.write(f"\r{corpus}: {done} {what}   ", ending="")
                    self.stderr.flush()

                outcome = index_build(corpus=corpus, resign=options["resign"], progress=progress)
                self.stderr.write("")
            report[corpus] = {**outcome, "seconds": round(time.perf_counter() - started, 1)}
        self.stdout.write(json.dumps(report))
