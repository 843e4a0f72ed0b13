from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "simia_web.jobs"
    label = "jobs"

    def ready(self):
        from .kinds import job_kinds_discover

        job_kinds_discover()  # every app's kinds register themselves: no app names its kinds anywhere else
