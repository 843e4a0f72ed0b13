from django.apps import AppConfig


class FidelityConfig(AppConfig):
    name = "simia_web.fidelity"
    label = "fidelity"
    verbose_name = "Fidelity against reference environments"

    def ready(self):
        from . import job_kinds  # noqa: F401  (registers the fidelity job kind)
