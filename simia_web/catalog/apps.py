from django.apps import AppConfig


class CatalogConfig(AppConfig):
    name = "simia_web.catalog"
    label = "catalog"

    def ready(self):
        from simia_web.dedup.corpora import corpus_register

        from .duplicates import CORPUS

        corpus_register(CORPUS)
