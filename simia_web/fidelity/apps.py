from django.apps import AppConfig


class FidelityConfig(AppConfig):
    name = "simia_web.fidelity"
    label = "fidelity"
    verbose_name = "Fidelity against reference environments"
