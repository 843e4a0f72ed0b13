from django.core.management.base import BaseCommand

from simia_web.jobs.services import jobs_recover


class Command(BaseCommand):
    help = "Re-queue the unfinished units of queued and running jobs (safe to run any time)."

    def handle(self, *args, **opts):
        self.stdout.write(f"Re-queued {jobs_recover()} messages.")
