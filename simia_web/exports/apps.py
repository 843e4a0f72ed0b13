from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "simia_web.exports"
    label = "exports"
