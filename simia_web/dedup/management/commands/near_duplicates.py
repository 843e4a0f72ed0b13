"""Build or rebuild the near-duplicate index.

manage.py near_duplicates                  sign what has no signature yet, then re-derive bands and clusters
manage.py near_duplicates --resign         read every text again (after a change to how texts are compared)
manage.py near_duplicates --corpus task    one corpus only (default: all)
"""

import json
import time

from django.core.management.base import BaseCommand

from simia_web.dedup.corpora import corpus_names
from simia_web.dedup.services import index_rebuild, index_sign_missing


class Command(BaseCommand):
    help = "Sign unsigned items and rebuild the near-duplicate index's bands and clusters from stored signatures."

    def add_arguments(self, parser):
        parser.add_argument("--corpus", choices=corpus_names(), action="append", help="default: every corpus")
        parser.add_argument("--resign", action="store_true", help="sign every item again from its text")

    def handle(self, *args, **options):
        report = {}
        for corpus in options["corpus"] or corpus_names():
            started = time.perf_counter()

            def progress(done: int, what: str, corpus=corpus) -> None:
                self.stderr.write(f"\r{corpus}: {done} {what}   ", ending="")
                self.stderr.flush()

            signed = index_sign_missing(corpus=corpus, resign=options["resign"], progress=progress)
            outcome = index_rebuild(corpus=corpus, progress=progress)
            self.stderr.write("")
            report[corpus] = {"signed": signed, **outcome, "seconds": round(time.perf_counter() - started, 1)}
        self.stdout.write(json.dumps(report))
