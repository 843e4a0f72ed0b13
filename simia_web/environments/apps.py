from django.apps import AppConfig


class EnvironmentsConfig(AppConfig):
    name = "simia_web.environments"
    label = "environments"
