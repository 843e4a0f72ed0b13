from django.apps import AppConfig


class AuditLogConfig(AppConfig):
    name = "simia_web.auditlog"
    label = "auditlog"

    def ready(self):
        from . import receivers  # noqa: F401  (connects the retention purge to the watchdog's beat)
