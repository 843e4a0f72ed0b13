"""Small per-process caches for reads that every job unit repeats (profiles, a domain's APIs)."""

import threading
import time
from collections.abc import Callable, Hashable

from django.conf import settings


class ProcessCache:
    """Values kept in this process for `settings.<ttl_setting>` seconds.

    Other processes see a change to the underlying rows when their entries expire (`clear` can be
    connected to a model's signals for the process that saves them). Cached values are shared between
    threads: callers must not modify them.
    """

    def __init__(self, ttl_setting: str):
        self._ttl_setting = ttl_setting
        self._entries: dict[Hashable, tuple[float, object]] = {}
        self._lock = threading.Lock()

    def get(self, key: Hashable, load: Callable[[], object]):
        now = time.monotonic()
        entry = self._entries.get(key)
        if entry and entry[0] > now:
            return entry[1]
        value = load()
        with self._lock:
            # Expired entries go when a new one comes: keys never asked again (finished jobs) do not pile up.
            self._entries = {k: e for k, e in self._entries.items() if e[0] > now}
            self._entries[key] = (now + getattr(settings, self._ttl_setting), value)
        return value

    def clear(self, **_signal_kwargs) -> None:
        with self._lock:
            self._entries.clear()
