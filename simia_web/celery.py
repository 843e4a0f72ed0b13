"""The Celery app: configured from Django's CELERY_* settings, tasks discovered in every app."""

import gc
import os
from collections.abc import Iterator, Mapping

from celery import Celery
from celery.signals import worker_process_init, worker_ready
from django.core.signals import setting_changed

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")


class DjangoCelerySettings(Mapping):
    """Django's CELERY_* settings as the mapping Celery reads its configuration from.

    Celery looks up about twenty options for every message it sends, most of them unset here. Read
    through django.conf.settings, each unset name raised an AttributeError inside LazySettings: a third
    of the CPU of sending a message. Here it is a dict miss. The values are read when first needed and
    again after a test overrides a CELERY_* setting.
    """

    def __init__(self):
        self._values: dict | None = None

    def _settings(self) -> dict:
        if self._values is None:
            from django.conf import settings

            self._values = {name: getattr(settings, name) for name in dir(settings) if name.startswith("CELERY_")}
        return self._values

    def __getitem__(self, key: str):
        return self._settings()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._settings())

    def __len__(self) -> int:
        return len(self._settings())

    def reload(self, *, setting: str, **kwargs) -> None:
        if setting.startswith("CELERY_"):
            self._values = None


celery_settings = DjangoCelerySettings()
setting_changed.connect(celery_settings.reload)

app = Celery("simia_web")
app.config_from_object(celery_settings, namespace="CELERY")
app.autodiscover_tasks()


@worker_ready.connect
@worker_process_init.connect
def _gc_freeze(**_kwargs):
    """Leave what the worker made while starting (modules, settings, the app, its tasks) out of garbage
    collection: it lives as long as the process, and every full collection would scan all of it again
    while the units' threads wait for the GIL."""
    gc.freeze()
