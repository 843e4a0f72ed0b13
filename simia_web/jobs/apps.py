from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "simia_web.jobs"
    label = "jobs"
