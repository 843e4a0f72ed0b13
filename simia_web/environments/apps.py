from django.apps import AppConfig


class EnvironmentsConfig(AppConfig):
    name = "simia_web.environments"
    label = "environments"

    def ready(self):
        from simia_web.llm.access import llm_call_reader_register

        from .selectors import llm_call_in_own_session

        llm_call_reader_register(llm_call_in_own_session)
