"""REST throttles that count for every web process and machine at once."""

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


def throttles_reset() -> None:
    """Forget every count (tests start from none)."""
    _storage(settings.SIMIA_THROTTLE_STORAGE_URL).reset()
    _storage(_LOCAL).reset()


class SharedRateThrottle(SimpleRateThrottle):
    """DRF's rate throttle, counted in a moving window by the `limits` library in SIMIA_THROTTLE_STORAGE_URL:
    Redis, shared by every web process and machine, where each hit is one atomic script (DRF's own throttle
    reads, appends and writes its history, so concurrent requests each saw room: 300 wrong tokens at once on
    two workers had 35 checked against a limit of 20). Without Redis, or while it cannot be reached, each
    process counts on its own."""

    def _item(self):
        return RateLimitItemPerSecond(self.num_requests, self.duration)

    def _limited(self, act: str, key: str) -> bool:
        """limiter.hit (counts) or limiter.test (does not): whether there is room."""
        url = settings.SIMIA_THROTTLE_STORAGE_URL
        try:
            return getattr(_limiter(url), act)(self._item(), key)
        except RedisError as exc:
            logger.warning("throttle counts in this process alone: %s is out of reach (%s)", url, exc)
            return getattr(_limiter(_LOCAL), act)(self._item(), key)

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        return self.key is None or self._limited("hit", self.key)

    def has_room(self, key: str) -> bool:
        self.key = key
        return self._limited("test", key)

    def wait(self):
        try:
            stats = _limiter(settings.SIMIA_THROTTLE_STORAGE_URL).get_window_stats(self._item(), self.key)
        except RedisError:
            return None
        return max(0.0, stats.reset_time - time.time())


class AnonThrottle(SharedRateThrottle, AnonRateThrottle):
    """Anonymous requests per client address (SIMIA_THROTTLE_ANON)."""


class UserThrottle(SharedRateThrottle, UserRateThrottle):
    """Requests per user, or per address when anonymous (SIMIA_THROTTLE_USER)."""
