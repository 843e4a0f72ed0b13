"""REST throttles that count for every web process and machine at once, in SIMIA_THROTTLE_STORAGE_URL: Redis
(where each count is one atomic script) or, without it or while it cannot be reached, each process's memory.

DRF's own throttles read, append and write a history in Django's cache, so requests arriving together each saw
room: 300 wrong tokens at once on two workers had 35 checked against a limit of 20."""

import functools
import logging
import time

from django.conf import settings
from limits import RateLimitItemPerSecond
from limits.storage import storage_from_string
from limits.strategies import MovingWindowRateLimiter
from redis.exceptions import RedisError
from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

logger = logging.getLogger(__name__)


@functools.cache
def _storage(url: str):
    return storage_from_string(url, key_prefix="simia-throttle")


@functools.cache
def _limiter(url: str) -> MovingWindowRateLimiter:
    return MovingWindowRateLimiter(_storage(url))


_LOCAL = "memory://"


def _counted(act):
    """act(storage URL), on the shared storage, or on this process's when Redis cannot be reached."""
    url = settings.SIMIA_THROTTLE_STORAGE_URL
    try:
        return act(url)
    except RedisError as exc:
        logger.warning("throttles count in this process alone: %s is out of reach (%s)", url, exc)
        return act(_LOCAL)


def throttles_reset() -> None:
    """Forget every count (tests start from none)."""
    _storage(settings.SIMIA_THROTTLE_STORAGE_URL).reset()
    _storage(_LOCAL).reset()


class SharedRateThrottle(SimpleRateThrottle):
    """DRF's rate throttle, counted in a moving window by the `limits` library."""

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        item = RateLimitItemPerSecond(self.num_requests, self.duration)
        if _counted(lambda url: _limiter(url).hit(item, self.key)):
            return True
        stats = _counted(lambda url: _limiter(url).get_window_stats(item, self.key))
        self.retry_after = max(0.0, stats.reset_time - time.time())
        return False

    def wait(self):
        return self.retry_after


class AttemptThrottle(SimpleRateThrottle):
    """Failed attempts per client, where an attempt takes its place before it is made and gives it back when it
    succeeds: of any number of attempts at once, at most the rate's number are made (a throttle counting after
    the attempt lets them all through). The window slides: this fixed window's count plus the last one's,
    weighted by the part of it still within the last `duration` seconds."""

    def attempt_begin(self, request) -> str | None:
        """The key holding this attempt's place, or None when no place is left (call wait() for how long)."""
        base = self.get_cache_key(request, None)
        window, into = divmod(self.timer(), self.duration)
        key, expiry = f"{base}:{int(window)}", 2 * self.duration
        taken = _counted(lambda url: _storage(url).incr(key, expiry))
        before = _counted(lambda url: _storage(url).get(f"{base}:{int(window) - 1}"))
        if taken + before * (1 - into / self.duration) <= self.num_requests:
            return key
        _counted(lambda url: _storage(url).incr(key, expiry, -1))
        self.retry_after = self.duration - into
        return None

    def attempt_succeeded(self, key: str) -> None:
        _counted(lambda url: _storage(url).incr(key, 2 * self.duration, -1))

    def wait(self):
        return self.retry_after


class AnonThrottle(SharedRateThrottle, AnonRateThrottle):
    """Anonymous requests per client address (SIMIA_THROTTLE_ANON)."""


class UserThrottle(SharedRateThrottle, UserRateThrottle):
    """Requests per user, or per address when anonymous (SIMIA_THROTTLE_USER)."""
