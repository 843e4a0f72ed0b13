from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "simia_web.accounts"
    label = "accounts"
