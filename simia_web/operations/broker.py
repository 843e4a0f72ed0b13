"""Reaching the broker from a web process: whether it answers, and how many messages wait in the queue."""

import kombu
import kombu.exceptions
from django.conf import settings

from simia_web.celery import app


def broker_connection() -> kombu.Connection:
    """A connection to the broker the settings name (not kept: probes and scrapes are seconds apart), which gives
    up after SIMIA_PROBE_TIMEOUT_SECONDS instead of retrying the way workers do."""
    timeout = settings.SIMIA_PROBE_TIMEOUT_SECONDS
    options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS}
    if settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        options.update(socket_timeout=timeout, socket_connect_timeout=timeout)
    return kombu.Connection(settings.CELERY_BROKER_URL, transport_options=options, connect_timeout=timeout)


def broker_check(connection: kombu.Connection) -> None:
    """Raise kombu.exceptions.OperationalError when the broker cannot be reached."""
    connection.ensure_connection(
        max_retries=1, interval_start=0, interval_step=0, timeout=settings.SIMIA_PROBE_TIMEOUT_SECONDS
    )


def queue_depths() -> dict[str, int]:
    """{queue: messages waiting} for the queue the workers take from (a queue never declared holds none).

    Raises kombu.exceptions.OperationalError when the broker cannot be reached."""
    queue = app.conf.task_default_queue
    with broker_connection() as connection:
        broker_check(connection)
        try:
            _name, messages, _consumers = connection.default_channel.queue_declare(queue=queue, passive=True)
        except kombu.exceptions.ChannelError:  # no such queue yet: nothing was ever sent to it
            messages = 0
    return {queue: messages}
