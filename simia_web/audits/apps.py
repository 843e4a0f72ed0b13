from django.apps import AppConfig


class AuditsConfig(AppConfig):
    name = "simia_web.audits"
    label = "audits"
    verbose_name = "Audits: error rates of populations estimated from a sample people decide"

    def ready(self):
        from . import services  # noqa: F401  (registers the audit's selection for bulk decision jobs)
