from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "simia_web.curation"
    label = "curation"

    def ready(self):
        from . import judging  # noqa: F401  (registers the judge job kind)
