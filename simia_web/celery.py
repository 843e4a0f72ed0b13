import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "simia_web.settings")

app = Celery("simia_web")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
