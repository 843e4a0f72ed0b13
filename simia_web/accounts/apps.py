from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "simia_web.accounts"
    label = "accounts"

    def ready(self):
        from . import receivers  # noqa: F401  (connects the sign-in audit receivers)
