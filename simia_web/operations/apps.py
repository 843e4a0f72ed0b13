from django.apps import AppConfig


class OperationsConfig(AppConfig):
    name = "simia_web.operations"
    label = "operations"
    verbose_name = "Operations: metrics, probes and webhooks"

    def ready(self):
        from . import receivers  # noqa: F401  (counts and webhook events from the other apps' signals)
