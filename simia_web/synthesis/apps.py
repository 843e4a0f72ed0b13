from django.apps import AppConfig


class SynthesisConfig(AppConfig):
    name = "simia_web.synthesis"
    label = "synthesis"
