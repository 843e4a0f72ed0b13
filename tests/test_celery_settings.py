"""Celery reads the CELERY_* Django settings, and sees a setting a test overrides."""

from django.test import override_settings

from simia_web.celery import app


def test_celery_options_come_from_django_settings(settings):
    assert app.conf.task_acks_late is True
    assert app.conf.broker_url == settings.CELERY_BROKER_URL
    assert app.conf.worker_prefetch_multiplier == settings.CELERY_WORKER_PREFETCH_MULTIPLIER


def test_an_overridden_setting_is_seen_and_restored():
    before = app.conf.task_always_eager
    with override_settings(CELERY_TASK_ALWAYS_EAGER=not before, CELERY_RESTORE_MARKER="set"):
        assert app.conf.task_always_eager is (not before)
        assert app.conf.restore_marker == "set"
    assert app.conf.task_always_eager is before
    assert "restore_marker" not in app.conf
