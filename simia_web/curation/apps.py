from django.apps import AppConfig


class CurationConfig(AppConfig):
    name = "simia_web.curation"
    label = "curation"
