"""Asking the broker, from a web process, whether it answers and how many messages wait in the queue."""

import threading

import kombu
import kombu.exceptions
from django.conf import settings

from simia_web.celery import app

# One connection per process, per broker URL, kept between probes and scrapes (a new one costs a few round trips,
# most of a scrape's time) and dropped after any error, so that the next call connects again.
_kept: dict[str, kombu.Connection] = {}
_lock = threading.Lock()  # kombu connections are not shared between threads; probes and scrapes are rare


def _connection() -> kombu.Connection:
    """A connection to the broker the settings name, which gives up after SIMIA_PROBE_TIMEOUT_SECONDS instead of
    retrying the way workers do."""
    timeout = settings.SIMIA_PROBE_TIMEOUT_SECONDS
    options = {**settings.CELERY_BROKER_TRANSPORT_OPTIONS}
    if settings.CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
        options.update(socket_timeout=timeout, socket_connect_timeout=timeout)
    return kombu.Connection(settings.CELERY_BROKER_URL, transport_options=options, connect_timeout=timeout)


def queue_depths() -> dict[str, int]:
    """{queue: messages waiting} for the queue the workers take from (a queue never declared holds none).

    A round trip to the broker: raises when it cannot be reached."""
    queue, url = app.conf.task_default_queue, settings.CELERY_BROKER_URL
    with _lock:
        connection = _kept.pop(url, None) or _connection()
        try:
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
            try:
                # A transport's channel declares queues; the stubs' abstract StdChannel does not say so.
                channel = connection.default_channel
                _name, messages, _consumers = channel.queue_declare(queue=queue, passive=True)  # type: ignore[attr-defined]
            except kombu.exceptions.ChannelError:  # no such queue yet: nothing was ever sent to it
                messages = 0
        except Exception:
            connection.release()
            raise
        _kept[url] = connection
    return {queue: messages}
