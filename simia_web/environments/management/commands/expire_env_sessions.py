from django.core.management.base import BaseCommand

from simia_web.environments.services import env_sessions_expire


class Command(BaseCommand):
    help = "Abandon RL sessions left without a step for SIMIA_ENV_IDLE_MINUTES (run it from cron)."

    def handle(self, *args, **options):
        ended = env_sessions_expire()
        self.stdout.write(f"{ended} idle session(s) abandoned")
