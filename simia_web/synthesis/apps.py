from django.apps import AppConfig


class SynthesisConfig(AppConfig):
    name = "simia_web.synthesis"
    label = "synthesis"

    def ready(self):
        from . import pipelines  # noqa: F401  (registers the job kinds)
