from django.apps import AppConfig


class DedupConfig(AppConfig):
    name = "simia_web.dedup"
    label = "dedup"
