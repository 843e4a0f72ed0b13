from django.apps import AppConfig
from django.db.models.signals import post_delete, post_save


class LlmConfig(AppConfig):
    name = "simia_web.llm"
    label = "llm"

    def ready(self):
        from .models import EndpointProfile, StageRoute
        from .selectors import profile_cache_clear

        for model in (EndpointProfile, StageRoute):
            post_save.connect(profile_cache_clear, sender=model, dispatch_uid=f"profile-cache-{model.__name__}")
            post_delete.connect(profile_cache_clear, sender=model, dispatch_uid=f"profile-cache-del-{model.__name__}")
