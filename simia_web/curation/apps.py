from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "simia_web.curation"
    label = "curation"

    def ready(self):
        from simia_web.dedup.corpora import corpus_register

        from .duplicates import CORPUS

        corpus_register(CORPUS)
