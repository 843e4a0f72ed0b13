from django.apps import AppConfig


class LlmConfig(AppConfig):
    name = "simia_web.llm"
    label = "llm"
