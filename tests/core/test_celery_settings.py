"""Celery reads the CELERY_* Django settings, and sees a setting a test overrides."""

from django.test import override_settings

from simia_web.celery import app


def test_celery_options_come_from_django_settings(settings):
    assert app.conf.task_acks_late is True
    assert app.conf.broker_url == settings.CELERY_BROKER_URL
    assert app.conf.worker_prefetch_multiplier == settings.CELERY_WORKER_PREFETCH_MULTIPLIER


def test_an_overridden_setting_is_seen_and_restored():
    before = app.conf.task_default_priority
    with override_settings(CELERY_TASK_DEFAULT_PRIORITY=7, CELERY_RESTORE_MARKER="set"):
        assert app.conf.task_default_priority == 7
        assert app.conf.restore_marker == "set"
    assert app.conf.task_default_priority == before
    assert "restore_marker" not in app.conf


def test_messages_are_json_only_and_no_setting_is_taken_for_a_celery_3_name():
    assert app.conf.task_serializer == "json"
    assert list(app.conf.accept_content) == ["json"]
    assert app.conf.result_backend is None
    assert not app.conf.maybe_warn_deprecated_settings()  # a worker would log "celery upgrade settings"
