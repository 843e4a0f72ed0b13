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


def _counted(of, method: str, *args):
    """of(storage URL).method(*args) on the shared storage, or on this process's when Redis cannot be reached."""
    url = settings.SIMIA_THROTTLE_STORAGE_URL
    try:
        return getattr(of(url), method)(*args)
    except RedisError as exc:
        logger.warning("throttles count in this process alone: %s is out of reach (%s)", url, exc)
        return getattr(of(_LOCAL), method)(*args)


def throttles_reset() -> None:
    """Forget every count (tests start from none)."""
    _storage(settings.SIMIA_THROTTLE_STORAGE_URL).reset()
    _storage(_LOCAL).reset()


class SharedRateThrottle(SimpleRateThrottle):
    """DRF's rate throttle, counted in a moving window by the `limits` library."""

    # Set from the rate by SimpleRateThrottle.__init__ (the stubs do not declare them).
    num_requests: int
    duration: int

    def allow_request(self, request, view):
        if self.rate is None:
            return True
        self.key = self.get_cache_key(request, view)
        if self.key is None:
            return True
        item = RateLimitItemPerSecond(self.num_requests, self.duration)
        if _counted(_limiter, "hit", item, self.key):
            return True
        stats = _counted(_limiter, "get_window_stats", item, self.key)
        self.retry_after = max(0.0, stats.reset_time - time.time())
        return False

    def wait(self):
        return self.retry_after


class AttemptThrottle(SimpleRateThrottle):
    """Failed attempts per client, counted so that of any number of attempts at once no more are made than the
    rate allows (a throttle that counts after the attempt lets them all through): an attempt is pending from
    before it is made until its outcome, and one begins only while failures and pending attempts together are
    within the rate. One that must wait for pending attempts to end (a client's burst of right tokens) waits
    up to PENDING_WAIT seconds. Failures count in a sliding window: this fixed window's count plus the last
    one's, weighted by the part of it still within the last `duration` seconds; pending attempts in
    per-minute counters that expire, so that a process dying mid-attempt holds no place for long."""

    PENDING_WAIT = 5.0
    # Set from the rate by SimpleRateThrottle.__init__ (the stubs do not declare them).
    num_requests: int
    duration: int

    def attempt_key(self, request) -> str:
        """The client's key: attempts count per client address, whatever the view."""
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _failures(self, base: str) -> float:
        window, into = divmod(self.timer(), self.duration)
        current = _counted(_storage, "get", f"{base}:failed:{int(window)}")
        before = _counted(_storage, "get", f"{base}:failed:{int(window) - 1}")
        self.retry_after = self.duration - into
        return current + before * (1 - into / self.duration)

    def attempt_begin(self, request) -> str | None:
        """The pending counter holding this attempt, or None when the client has no attempt left (see wait())."""
        base = self.attempt_key(request)
        deadline = time.monotonic() + self.PENDING_WAIT
        while True:
            minute = int(self.timer() // 60)
            key = f"{base}:pending:{minute}"
            pending = _counted(_storage, "incr", key, 120)
            pending += _counted(_storage, "get", f"{base}:pending:{minute - 1}")
            failures = self._failures(base)
            if failures + pending <= self.num_requests:
                return key
            _counted(_storage, "incr", key, 120, -1)
            if failures >= self.num_requests or time.monotonic() > deadline:
                return None
            time.sleep(0.02)

    def attempt_end(self, request, key: str, *, failed: bool) -> None:
        if failed:
            base = self.attempt_key(request)
            window = f"{base}:failed:{int(self.timer() // self.duration)}"
            _counted(_storage, "incr", window, 2 * self.duration)
        _counted(_storage, "incr", key, 120, -1)

    def wait(self):
        return self.retry_after


class AnonThrottle(SharedRateThrottle, AnonRateThrottle):
    """Anonymous requests per client address (SIMIA_THROTTLE_ANON)."""


class UserThrottle(SharedRateThrottle, UserRateThrottle):
    """Requests per user, or per address when anonymous (SIMIA_THROTTLE_USER)."""
