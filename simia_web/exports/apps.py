from django.apps import AppConfig


class ExportsConfig(AppConfig):
    name = "simia_web.exports"
    label = "exports"

    def ready(self):
        from . import receivers  # noqa: F401 (connects the receivers)
