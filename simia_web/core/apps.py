from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "simia_web.core"
    label = "core"
