from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "simia_web.catalog"
    label = "catalog"
