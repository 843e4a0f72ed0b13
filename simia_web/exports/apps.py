from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "simia_web.exports"
    label = "exports"

    def ready(self):
        from . import pipelines  # noqa: F401  (registers the export job kind)
