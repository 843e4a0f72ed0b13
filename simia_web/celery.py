import os
import sys

from celery import Celery
from celery.signals import worker_init

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

app = Celery("simia_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()


@worker_init.connect
def _short_gil_slices(**_kwargs):
    """Workers are dozens of threads waiting on LLM answers: hand the GIL over sooner than the 5 ms default
    so a thread whose answer arrived does not queue behind another's Python work."""
    sys.setswitchinterval(float(os.environ.get("SIMIA_WORKER_SWITCH_INTERVAL", "0.001")))
