"""An endpoint's limits for the whole cluster: concurrent requests, requests and tokens per minute.

Every worker process and machine that sends to a profile's endpoint shares them through Redis:

- concurrency: leases in a sorted set, taken, renewed and given back by Lua scripts (atomic on the
  server). A lease lasts SIMIA_LLM_LEASE_SECONDS; the process holding it renews all its leases in one
  call every third of that while their requests run, however long they take (a slow endpoint's
  timeout grows to several times the profile's), so a lease expires on its own only when its worker
  died holding it. A waiter blocks on a wake-up list that each release pushes to (Redis serves
  blocked clients first come, first served), and looks again every second for leases that expired.
  One waiting thread per process blocks there; the process's others wait for it or for a lease passed
  on within the process (below).
- requests and tokens per minute (the profile's): sliding-window counters from the `limits` library,
  keyed by profile. Tokens are reserved before the request (prompt bytes / 4 + max_tokens).
- a 429 answer starts a cool-down that every other sender waits out (the server's Retry-After, or
  one second; the thread that got the 429 waits before its retry anyway, see client._complete), and
  halves the concurrency the endpoint is given, once per cool-down; each successful answer then adds
  1 / cap back (additive increase), so a rate-limited endpoint converges on what it can take instead
  of answering storms of 429s.

The concurrency given is adaptive (adaptive.py): the profile's max_concurrency is the ceiling, and the
limit in force (the `cap` key) falls when an answer's time per unit of work rises with the number in
flight, or a request times out, and grows while latency stays flat. Every exchange's time, size and
the leases held when it was sent are a sample, carried on its lease and applied by the script that
gives the lease back (no round trip of its own). A request given up on (its read timed out) keeps its
lease for about the time the endpoint needs to finish it (llama-cpp-python goes on writing an answer
nobody reads), so that its retry, which takes a lease like any request, does not join it there.

Without Redis (the embedded default, one machine) the same limits hold per process: concurrency
through the process's slots and its own adaptive limit, rates in memory, the cool-down in the process.

Redis out of reach (a restart, a network cut) is waited out before a request is sent: the limits
cannot be kept without it, and the call has not been made yet, so nothing is recorded and no attempt
of the call or of its unit is spent. A lease that cannot be given back after an answer is given back
once Redis answers again (a restarted Redis has forgotten it anyway).

Within a process, a request first takes one of the profile's local slots, ranked (see
llm.services.llm_slot_rank), so the cluster lease goes to the unit that should go first. A lease whose
request was answered stays in the process as a spare, for at most _LEASE_USES requests in all: it passes
straight to a thread waiting for a slot or a lease, or, when none waits, to the next request the process
sends within a tenth of the time the last one took (at most _SPARE_HOLD_MAX seconds; the thread that
renews the leases gives back the spares nobody took by then). A busy worker then talks to Redis for a
fraction of its requests instead of twice for each (two script calls were a tenth of a worker's CPU per
call; where the worker itself is the bottleneck, the cap seldom binds and no thread waits, so leases
were seldom passed on), and every lease still goes back through Redis, waking the cluster's waiters,
after a few requests. The count of leases never changes by it, so the cap holds; another process may
wait up to the hold for a spare nobody here took (a tenth of a request's time); a cool-down another
process started is seen by the next lease taken from Redis, at most _LEASE_USES - 1 requests per lease
later, and a cool-down a 429 here started sends every spare back at once. Leases are kept spare only while the
endpoint is given its whole ceiling: below it, each lease goes back with its sample, at once.
"""

import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

import redis
from django.conf import settings
from limits import RateLimitItemPerMinute
from limits.storage import storage_from_string
from limits.strategies import SlidingWindowCounterRateLimiter

from simia_web.core.db import db_connection_check, db_connection_give_back
from simia_web.core.outages import is_outage, through_outages

from .adaptive import LUA_SAMPLE, LocalAdaptive, Sample, allowed, work_bytes
from .slots import Rank, Slots

logger = logging.getLogger(__name__)

# A waiter looks again this often (seconds) for leases that expired without being given back.
_LEASE_POLL = 1.0
# The cool-down after a 429 without a Retry-After, and the cap on a server's Retry-After.
_DEFAULT_COOL_DOWN = 1.0
_MAX_COOL_DOWN = 60.0
# The adaptive limit, its yardstick and history are forgotten after this long unused (the ceiling applies again).
_CAP_MEMORY_MS = 86_400_000
# A request given up on keeps its lease for the time the endpoint would take to answer it alone, within these bounds
# (seconds); unmeasured yet, for twice as long as it was given.
_ABANDONED_HOLD = (1.0, 300.0)
# Requests a lease serves, passed from thread to thread within a process, before it goes back to Redis.
_LEASE_USES = 4
# A spare lease that no thread waits for is kept for the process's next request this share of the time its last
# request took, and at most this long (seconds).
_SPARE_HOLD_SHARE = 0.1
_SPARE_HOLD_MAX = 0.05

# Returns {0, leases held with this one, the adaptive limit} when a lease was taken, {-1, held, limit} when all
# are held, or {the cool-down's remaining ms} (unless the caller is the one that started it: ARGV[4] = 1). With no
# adaptive limit kept, the limit starts at ARGV[5] (the server's slots where known, else the ceiling).
_ACQUIRE = """
local cool = redis.call('PTTL', KEYS[3])
if cool > 0 and ARGV[4] ~= '1' then return {cool} end
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now_ms)
local limit = tonumber(ARGV[2])
local adapted = redis.call('GET', KEYS[2]) or ARGV[5]
local cap = math.max(1, math.min(limit, math.floor(tonumber(adapted) + 1e-9)))
local held = redis.call('ZCARD', KEYS[1])
if held < cap then
  redis.call('ZADD', KEYS[1], now_ms + tonumber(ARGV[3]), ARGV[1])
  redis.call('PEXPIRE', KEYS[1], ARGV[3])
  return {0, held + 1, adapted}
end
return {-1, held, adapted}
"""
# Extends the leases named in ARGV[2:] that are still held (an expired one is not brought back) to ARGV[1] ms.
_RENEW = """
local now = redis.call('TIME')
local until_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000) + tonumber(ARGV[1])
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', until_ms, ARGV[i])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
"""
# Gives a lease back (waking one waiter), unless ARGV[7] = 1 (a request given up on: the lease stays held), and
# adapts the cap (unset: ARGV[8]): the samples the lease carries (ARGV[9:], three values each, see adaptive.py) each
# take a step;
# a 429 halves it once per cool-down; each of the ARGV[6] answers without a sample raises it by 1 / cap. Returns
# {the cap, noload}.
_RELEASE = (
    LUA_SAMPLE
    + """
ceiling = tonumber(ARGV[2])
memory_ms = tonumber(ARGV[5])
local now = redis.call('TIME')
now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local cap = tonumber(redis.call('GET', KEYS[2]) or ARGV[8])
local before
local noload = tonumber(redis.call('HGET', KEYS[5], 'noload') or '0')
for i = 9, #ARGV, 3 do
  local stepped
  stepped, noload = adapt(cap, tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), noload)
  note_limit(cap, stepped, false)
  cap = stepped
end
if #ARGV >= 9 then
  redis.call('HSET', KEYS[5], 'noload', string.format('%.9g', noload))
  redis.call('PEXPIRE', KEYS[5], memory_ms)
end
before = cap
if ARGV[3] == 'throttled' then
  if redis.call('SET', KEYS[3], '1', 'PX', ARGV[4], 'NX') then cap = math.max(1, cap / 2) end
elseif tonumber(ARGV[6]) > 0 and cap < ceiling then
  for _ = 1, tonumber(ARGV[6]) do cap = math.min(ceiling, cap + 1 / cap) end
end
if cap ~= before then note_limit(before, cap, false) end
if ARGV[7] ~= '1' and redis.call('ZREM', KEYS[1], ARGV[1]) == 1 then
  redis.call('LPUSH', KEYS[4], '1')
  redis.call('LTRIM', KEYS[4], 0, ceiling - 1)
  redis.call('PEXPIRE', KEYS[4], 60000)
end
return {string.format('%.6f', cap), string.format('%.9g', noload)}
"""
)
# Sets the adaptive limit where a probe found the server's slots (ARGV[1]), and the yardstick it measured (ARGV[2],
# kept if lower), noting the change in the history.
_START = (
    LUA_SAMPLE
    + """
memory_ms = tonumber(ARGV[3])
local now = redis.call('TIME')
now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local before = tonumber(redis.call('GET', KEYS[2]) or '0')
local noload = tonumber(redis.call('HGET', KEYS[5], 'noload') or '0')
local measured = tonumber(ARGV[2])
if measured > 0 and (noload <= 0 or measured < noload) then
  redis.call('HSET', KEYS[5], 'noload', ARGV[2])
  redis.call('PEXPIRE', KEYS[5], memory_ms)
end
note_limit(before, tonumber(ARGV[1]), true)
"""
)


@dataclass(frozen=True)
class EndpointLimits:
    concurrency: int
    requests_per_minute: int | None = None
    tokens_per_minute: int | None = None
    # How long a lease lasts unless its holder renews it: how long a dead worker's leases keep their places.
    lease_seconds: float = 30.0
    # Where the adaptive limit starts when none is kept: the server's slots, where a probe found them.
    start: int | None = None


@dataclass
class _Lease:
    token: str
    uses: int = 0  # requests sent under it
    successes: int = 0  # of those, answered without a measured time: each raises a lowered cap (1 / cap)
    spare_until: float = 0.0  # while spare or given up on: when it goes back to Redis (time.monotonic)
    in_flight: int = 1  # leases held in the cluster when it was taken, itself included
    samples: list[Sample] = field(default_factory=list)  # measured exchanges, applied as it goes back


class Outcome:
    """How an exchange ended, for the adaptive cap: set by the caller inside `held`."""

    def __init__(self):
        self.throttled = False
        self.retry_after: float | None = None
        self.succeeded = False
        # Set by the transport: (seconds from sending to the answer's last byte, bytes sent, bytes received).
        self.measured: tuple[float, int, int] | None = None
        self.timed_out = False  # the transport gave up waiting for the answer (the endpoint may still be writing it)
        self.answer_cap = 0  # when timed out: the bytes the endpoint may still write for it


class EndpointLimiter:
    def __init__(self, key: str, limits: EndpointLimits, redis_url: str = ""):
        self.key = key
        self.limits = limits
        self._slots = Slots(max(1, limits.concurrency))
        self._start = float(max(1, min(limits.concurrency, limits.start or limits.concurrency)))
        self._redis = None
        if redis_url:
            # A thread holds a connection while it waits for a lease (BLPOP); at most one per local slot does.
            pool = redis.BlockingConnectionPool.from_url(redis_url, max_connections=limits.concurrency + 8)
            self._redis = redis.Redis(connection_pool=pool)
            self._acquire = self._redis.register_script(_ACQUIRE)
            self._release = self._redis.register_script(_RELEASE)
            self._renew = self._redis.register_script(_RENEW)
            self._start_script = self._redis.register_script(_START)
        self._rates = None
        if limits.requests_per_minute or limits.tokens_per_minute:
            self._rates = SlidingWindowCounterRateLimiter(storage_from_string(redis_url or "memory://"))
        self._local_cool_down_until = 0.0
        self._lock = threading.Lock()
        self._passed = threading.Condition(self._lock)  # notified when a lease is passed on, or the listener leaves
        self._spared = threading.Condition(self._lock)  # notified when a spare is due back sooner (_renew_forever)
        self._sweep_at = 0.0  # when the renewing thread wakes next (time.monotonic)
        self._passing_awaited = 0  # threads waiting on it
        self._listening = False  # whether a thread of the process waits on the cluster's wake-up list
        self._throttled = threading.local()  # .until: when the cool-down this thread's own 429 started ends
        self._gave_up = threading.local()  # .until: when the endpoint should be done with what this thread gave up on
        self._unreleased: list[str] = []  # leases Redis could not be told about when given back
        self._held: set[str] = set()  # leases of requests running now or spare, which the renewer keeps alive
        self._spare: list[_Lease] = []  # leases answered, kept for the process's next requests (oldest first)
        self._abandoned: list[_Lease] = []  # leases of requests given up on, held while the endpoint may still work
        self._renewer: threading.Thread | None = None
        # The adaptive limit as last read from Redis, and its yardstick (seconds per 1,000 bytes of work).
        self._known_limit = self._start
        self._noload = 0.0
        # Without Redis: this process's adaptive limit, and its requests in flight (those given up on included).
        self._local = LocalAdaptive(max(1, limits.concurrency), self._start)
        self._local_in_flight = 0
        self._local_abandoned: list[float] = []  # when each request given up on stops counting (time.monotonic)
        self._local_free = threading.Condition(self._lock)

    @contextmanager
    def held(self, rank: Rank, *, tokens: Callable[[], int]) -> Iterator[Outcome]:
        """Hold the right to send one request for the duration of the block."""
        outcome = Outcome()
        db_connection_give_back()
        with self._slots.taken(rank):
            lease = None
            in_flight = 1
            if self._redis is not None:
                lease = self._lease_take()
            else:
                self._wait_local_cool_down()
                in_flight = self._local_take()
            started = time.monotonic()
            try:
                self._take_rates(tokens)
                started = time.monotonic()  # the request's own time sizes the hold of its spare lease
                yield outcome
            finally:
                if outcome.timed_out and outcome.measured is not None:
                    # The most the endpoint may still write for it: the request's max_tokens, at 4 bytes a token.
                    outcome.answer_cap = 4 * max(0, tokens() - outcome.measured[1] // 4)
                if lease is None:
                    self._local_give_back(outcome, in_flight)
                else:
                    self._lease_give_back(lease, outcome, took=time.monotonic() - started)
        db_connection_check()  # the database may have restarted while this thread waited on the endpoint

    def expected_seconds(self, sent_bytes: int, answer_bytes: int = 0) -> float | None:
        """How long a request of this size (and answer) takes the endpoint alone, by the least time per unit of work
        seen (this process's figure, or the cluster's as last read from Redis); None before any was measured."""
        noload = self._local.noload if self._redis is None else self._noload
        return noload * work_bytes(sent_bytes, answer_bytes) / 1000 if noload > 0 else None

    def abandoned_wait(self) -> float:
        """Seconds until the endpoint should be done with the request this thread last gave up on (0: none): its
        retry waits that long, so that it is not sent into a server still writing the abandoned answer."""
        return max(0.0, getattr(self._gave_up, "until", 0.0) - time.monotonic())

    def adaptive_state(self) -> dict:
        """{"limit", "ceiling", "noload", "history": [{"at", "limit"}, ...] oldest first, "in_flight"}."""
        if self._redis is None:
            with self._lock:
                in_flight = self._local_in_flight + len(self._local_abandoned)
            return {**self._local.snapshot(), "in_flight": in_flight}
        return adaptive_state_read(self._redis, self.key, self.limits.concurrency, self._start)

    def adaptive_start(self, limit: int, noload: float = 0.0) -> None:
        """Start the adaptive limit at `limit` (a server's slots, found by a probe), with the time per unit of work
        measured (seconds per 1,000 bytes; 0: none)."""
        limit = max(1, min(self.limits.concurrency, limit))
        if self._redis is None:
            self._local.start_at(limit, noload)
            return
        keys = self._keys("leases", "cap", "cool-down", "wake", "adaptive", "history")
        self._redis_call(self._start_script, keys=keys, args=[limit, repr(noload), _CAP_MEMORY_MS])
        self._known_limit = float(limit)
        if noload > 0 and (self._noload <= 0 or noload < self._noload):
            self._noload = noload

    def _take_rates(self, tokens: Callable[[], int]) -> None:
        if self._rates is None:
            return
        per_minute = [(self.limits.requests_per_minute, "requests", lambda: 1)]
        per_minute.append((self.limits.tokens_per_minute, "tokens", tokens))
        for limit, what, cost in per_minute:
            if not limit:
                continue
            item, amount = RateLimitItemPerMinute(limit), min(limit, max(1, cost()))
            while not self._redis_call(self._rates.hit, item, self.key, what, cost=amount):
                reset_at = self._redis_call(self._rates.get_window_stats, item, self.key, what).reset_time
                time.sleep(min(max(reset_at - time.time(), 0.05), _LEASE_POLL))

    def _redis_call(self, call, *args, **kwargs):
        """Call Redis, waiting out an outage (the request waits unsent; see the module's notes)."""
        return through_outages(lambda: call(*args, **kwargs), what=f"the limits of {self.key}")

    # -- cluster-wide: Redis ---------------------------------------------------------------------

    def _keys(self, *names: str) -> list[str]:
        return limit_keys(self.key, *names)

    def _lease_take(self) -> _Lease:
        with self._lock:
            if self._spare and not self._cooling():
                return self._spare.pop()
        lease = uuid.uuid4().hex
        keys = self._keys("leases", "cap", "cool-down")
        ttl_ms = self._lease_ms()
        while True:
            self._give_back_late()
            excused = int(self._excused())
            args = [lease, self.limits.concurrency, ttl_ms, excused, self._start]
            answer = self._redis_call(self._acquire, keys=keys, args=args)
            if len(answer) > 1:
                self._known_limit = float(answer[2])
            if answer[0] == 0:
                self._renewal_start(lease)
                return _Lease(lease, in_flight=int(answer[1]))
            if answer[0] > 0:
                time.sleep(answer[0] / 1000)
            elif passed := self._lease_wait():
                return passed

    def _lease_wait(self) -> _Lease | None:
        """Wait until a lease may be free: one thread of the process listens for leases given back in Redis (the
        cluster's wake-up list), the others for a lease a thread of this process passes on, which is returned.
        None: look in Redis again (a lease was given back, or a poll's time passed: an expired one may be free)."""
        with self._lock:
            if self._listening:
                self._passing_awaited += 1
                try:
                    self._passed.wait(timeout=_LEASE_POLL)
                finally:
                    self._passing_awaited -= 1
                return self._spare.pop() if self._spare and not self._cooling() else None
            self._listening = True
        assert self._redis is not None  # leases are taken only where Redis keeps them
        try:
            self._redis_call(self._redis.blpop, self._keys("wake"), timeout=_LEASE_POLL)
        finally:
            with self._lock:
                self._listening = False
                self._passed.notify()  # another waiter listens next
        return None

    def _lease_ms(self) -> int:
        return int(self.limits.lease_seconds * 1000)

    def _renewal_start(self, lease: str) -> None:
        with self._lock:
            self._held.add(lease)
            if self._renewer is None:
                self._renewer = threading.Thread(target=self._renew_forever, name=f"leases {self.key}", daemon=True)
                self._renewer.start()

    def _renew_forever(self) -> None:
        """Renew this process's leases every third of their life, all in one call; between renewals, give back the
        spare leases that no request took in time, and those of requests given up on once the endpoint is done."""
        renew_at = time.monotonic() + self.limits.lease_seconds / 3
        while True:
            with self._lock:
                while True:
                    now = time.monotonic()
                    lapsed = [lease for lease in self._spare if lease.spare_until <= now or self._cooling()]
                    lapsed += [lease for lease in self._abandoned if lease.spare_until <= now]
                    if lapsed or now >= renew_at:
                        break
                    due = [lease.spare_until for lease in self._spare + self._abandoned]
                    self._sweep_at = min([renew_at, *due])
                    self._spared.wait(self._sweep_at - now)
                for lease in lapsed:
                    (self._spare if lease in self._spare else self._abandoned).remove(lease)
                    self._held.discard(lease.token)
                held = list(self._held) if now >= renew_at else []
            for lease in lapsed:
                try:
                    self._lease_release(lease, "ok", 0)
                except Exception:  # the lease expires on its own; a thread that stopped would lose every lease
                    logger.exception("endpoint limits %s: giving back a spare lease failed", self.key)
            if now < renew_at:
                continue
            renew_at = now + self.limits.lease_seconds / 3
            if not held:
                continue
            try:
                self._renew(keys=self._keys("leases"), args=[self._lease_ms(), *held])
            except Exception as exc:  # the next beat tries again; a thread that stopped would lose every lease
                if is_outage(exc):
                    logger.warning("endpoint limits %s: Redis is out of reach, leases not renewed (%s)", self.key, exc)
                else:
                    logger.exception("endpoint limits %s: renewing leases failed", self.key)

    def _lease_give_back(self, lease: _Lease, outcome: Outcome, took: float = 0.0) -> None:
        """After its request (which took `took` seconds): keep the lease spare for the process's next requests, or
        give it back to Redis; a request given up on keeps it while the endpoint may still be working on it."""
        answered = outcome.succeeded and not outcome.throttled
        lease.uses += 1
        sample = self._sample(outcome, lease.in_flight)
        if sample is not None:
            lease.samples.append(sample)
        else:
            lease.successes += answered
        cool_down_ms = int(self._note_throttled(outcome) * 1000)
        if outcome.timed_out:
            self._lease_abandon(lease, sample, outcome.answer_cap)
            return
        with self._lock:
            whole = allowed(self._known_limit) >= self.limits.concurrency
            if answered and whole and lease.uses < _LEASE_USES and not self._cooling():
                # As many spares as threads waiting for a slot or a lease are theirs: each takes one as it wakes (a
                # poll's time at most). Any other goes to the next request sent in time.
                awaited = len(self._spare) < self._slots.awaited() + self._passing_awaited
                hold = _LEASE_POLL if awaited else min(_SPARE_HOLD_MAX, _SPARE_HOLD_SHARE * took)
                lease.spare_until = time.monotonic() + hold
                self._spare.append(lease)
                self._passed.notify()
                if lease.spare_until < self._sweep_at:
                    self._spared.notify()
                return
            self._held.discard(lease.token)
            if outcome.throttled and self._spare:
                self._spared.notify()  # the cool-down sends the spares back
        result = "throttled" if outcome.throttled else "ok" if outcome.succeeded else "failed"
        self._lease_release(lease, result, cool_down_ms)

    def _lease_abandon(self, lease: _Lease, sample: Sample | None, answer_cap: int) -> None:
        """A request given up on: its timeout lowers the limit at once, and its lease is held until the endpoint
        would have finished it, then given back by the renewing thread."""
        self._lease_release(lease, "failed", 0, keep=True)
        lease.samples, lease.successes = [], 0
        with self._lock:
            lease.spare_until = self._gave_up.until = time.monotonic() + self._abandoned_hold(sample, answer_cap)
            self._abandoned.append(lease)
            if lease.spare_until < self._sweep_at:
                self._spared.notify()

    def _lease_release(self, lease: _Lease, result: str, cool_down_ms: int, *, keep: bool = False) -> None:
        samples = [value for sample in lease.samples for value in sample.encoded()]
        try:
            answer = self._release(
                keys=self._keys("leases", "cap", "cool-down", "wake", "adaptive", "history"),
                args=[
                    lease.token,
                    self.limits.concurrency,
                    result,
                    cool_down_ms,
                    _CAP_MEMORY_MS,
                    lease.successes,
                    int(keep),
                    self._start,
                    *samples,
                ],
            )
            self._limit_note(self._known_limit, float(answer[0]))
            self._known_limit, self._noload = float(answer[0]), float(answer[1])
        except Exception as exc:
            if not is_outage(exc):
                raise
            # The answer is in: it goes to its caller now, and the lease back to Redis when it answers again.
            logger.warning("endpoint limits %s: Redis is out of reach, a lease is given back later (%s)", self.key, exc)
            if not keep:
                with self._lock:
                    self._unreleased.append(lease.token)

    def _give_back_late(self) -> None:
        """Give back the leases an outage kept, before taking another (they would hold its place)."""
        if not self._unreleased:
            return
        with self._lock:
            unreleased, self._unreleased = self._unreleased, []
        assert self._redis is not None  # leases are given back only where Redis keeps them
        try:
            self._redis.zrem(self._keys("leases")[0], *unreleased)
        except Exception as exc:
            if not is_outage(exc):
                raise
            with self._lock:  # still out of reach: the next request tries again
                self._unreleased.extend(unreleased)

    # -- per process: the embedded default -------------------------------------------------------

    def _wait_local_cool_down(self) -> None:
        """Wait out a cool-down this process started (there is no lease to take without Redis)."""
        wait = self._local_cool_down_until - time.monotonic()
        if wait > 0 and not self._excused():
            time.sleep(wait)

    def _local_take(self) -> int:
        """Wait until the process's adaptive limit lets one more request out; returns the number in flight with it."""
        with self._lock:
            while True:
                now = time.monotonic()
                self._local_abandoned = [until for until in self._local_abandoned if until > now]
                in_flight = self._local_in_flight + len(self._local_abandoned)
                if in_flight < self._local.allowed():
                    self._local_in_flight += 1
                    return in_flight + 1
                due = min(self._local_abandoned, default=now + _LEASE_POLL)
                self._local_free.wait(timeout=min(_LEASE_POLL, max(0.01, due - now)))

    def _local_give_back(self, outcome: Outcome, in_flight: int) -> None:
        throttled_before, limit_before = self._cooling(), self._local.limit
        self._note_throttled(outcome)
        sample = self._sample(outcome, in_flight)
        if outcome.throttled and not throttled_before:
            self._local.halve()
        elif sample is not None:
            self._local.sample(sample)
        elif outcome.succeeded and not outcome.throttled:
            self._local.succeeded()
        self._limit_note(limit_before, self._local.limit)
        with self._lock:
            self._local_in_flight -= 1
            if outcome.timed_out:
                self._gave_up.until = time.monotonic() + self._abandoned_hold(sample, outcome.answer_cap)
                self._local_abandoned.append(self._gave_up.until)
            self._local_free.notify_all()

    # -- both ------------------------------------------------------------------------------------

    def _limit_note(self, before: float, after: float) -> None:
        if allowed(before) != allowed(after):
            logger.info(
                "endpoint limits %s: %d in flight allowed (was %d; at most %d)",
                self.key,
                allowed(after),
                allowed(before),
                self.limits.concurrency,
            )

    @staticmethod
    def _sample(outcome: Outcome, in_flight: int) -> Sample | None:
        """The exchange as a sample for the adaptive limit: answered, or given up on; None when unmeasured (not sent,
        refused, or a 429, which has its own rule; or SIMIA_LLM_ADAPTIVE_CONCURRENCY is off)."""
        if not settings.SIMIA_LLM_ADAPTIVE_CONCURRENCY:
            return None
        if outcome.measured is None or outcome.throttled or not (outcome.succeeded or outcome.timed_out):
            return None
        seconds, sent, received = outcome.measured
        return Sample(seconds=seconds, sent=sent, received=received, in_flight=in_flight, dropped=outcome.timed_out)

    def _abandoned_hold(self, sample: Sample | None, answer_cap: int = 0) -> float:
        """How long a request given up on keeps its place: the time the endpoint takes for it alone, reading its prompt
        and writing the longest answer it may (twice as long as it was given, before anything was measured: a server
        that ran past a timeout may well need as much again)."""
        if sample is None:
            return _ABANDONED_HOLD[0]
        expected = self.expected_seconds(sample.sent, answer_cap)
        low, high = _ABANDONED_HOLD
        return min(high, max(low, expected if expected is not None else 2 * sample.seconds))

    def _note_throttled(self, outcome: Outcome) -> float:
        """The cool-down a 429 starts (seconds); the thread that got it waits before its retry anyway."""
        retry_after = outcome.retry_after
        cool_down = min(retry_after, _MAX_COOL_DOWN) if retry_after and retry_after > 0 else _DEFAULT_COOL_DOWN
        if outcome.throttled:
            until = time.monotonic() + cool_down
            self._throttled.until = max(until, getattr(self._throttled, "until", 0.0))
            with self._lock:
                self._local_cool_down_until = max(self._local_cool_down_until, until)
        return cool_down

    def _cooling(self) -> bool:
        """Whether a cool-down a 429 in this process started is in force."""
        return time.monotonic() < self._local_cool_down_until

    def _excused(self) -> bool:
        """Whether a cool-down in force is the one this thread's own 429 started."""
        return time.monotonic() < getattr(self._throttled, "until", 0.0)


def limit_keys(name: str, *keys: str) -> list[str]:
    return [f"simia:llm-limits:{name}:{key}" for key in keys]


def adaptive_state_read(client: redis.Redis, name: str, ceiling: int, start: float | None = None) -> dict:
    """An endpoint's adaptive limit as Redis keeps it for the cluster (one round trip)."""
    cap, adaptive, history, leases = limit_keys(name, "cap", "adaptive", "history", "leases")
    pipe = client.pipeline(transaction=False)
    pipe.get(cap)
    pipe.hget(adaptive, "noload")
    pipe.lrange(history, 0, -1)
    pipe.zcard(leases)
    limit, noload, changes, in_flight = pipe.execute()
    points = []
    for change in reversed(changes):  # oldest first
        at_ms, _, value = change.decode().partition(":")
        points.append({"at": int(at_ms) / 1000, "limit": float(value)})
    return {
        "limit": min(float(ceiling), float(limit)) if limit else float(min(ceiling, start or ceiling)),
        "ceiling": ceiling,
        "noload": float(noload or 0),
        "history": points,
        "in_flight": int(in_flight),
    }


def limiter_name(profile) -> str:
    """The name a profile's limits are kept under (the URL is in it: databases that share a Redis, as staging and
    tests do, reuse profile ids)."""
    return f"{profile.pk}@{profile.base_url}"


def profile_slots(profile) -> int | None:
    """The slots a probe found the profile's server to have (reported or measured), if it was this server."""
    pace = (profile.capabilities or {}).get("concurrency") or {}
    if not pace.get("slots") or (pace.get("base_url"), pace.get("model")) != (profile.base_url, profile.model):
        return None
    return int(pace["slots"])


_state_clients: dict[str, redis.Redis] = {}


def profile_adaptive_state(profile) -> dict | None:
    """A profile's adaptive limit as the cluster keeps it (Redis), or as this process does without Redis (its
    limiter's, or where one would start); None when Redis is out of reach."""
    ceiling, start = max(1, profile.max_concurrency), profile_slots(profile)
    url = settings.SIMIA_LLM_LIMITS_REDIS_URL
    if url:
        client = _state_clients.get(url)
        if client is None:
            client = _state_clients[url] = redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)
        try:
            return adaptive_state_read(client, limiter_name(profile), ceiling, start)
        except Exception as exc:
            if is_outage(exc):
                return None
            raise
    limiter = endpoint_limiter_existing(profile)
    if limiter is not None:
        return limiter.adaptive_state()
    limit = float(min(ceiling, start or ceiling))
    return {"limit": limit, "ceiling": ceiling, "noload": 0.0, "history": [], "in_flight": 0}


_limiters: dict[tuple, EndpointLimiter] = {}
_limiters_lock = threading.Lock()


def endpoint_limiter(profile) -> EndpointLimiter:
    """The process's limiter for a profile (one per profile and set of limits, shared by its threads)."""
    limits = EndpointLimits(
        concurrency=max(1, profile.max_concurrency),
        requests_per_minute=profile.requests_per_minute,
        tokens_per_minute=profile.tokens_per_minute,
        lease_seconds=settings.SIMIA_LLM_LEASE_SECONDS,
        start=profile_slots(profile),
    )
    # Not keyed by where the limit starts: a probe moves the limiter's limit (adaptive_start), not to another limiter.
    key = (profile.pk, profile.base_url, replace(limits, start=None), settings.SIMIA_LLM_LIMITS_REDIS_URL)
    with _limiters_lock:
        if key not in _limiters:
            _limiters[key] = EndpointLimiter(limiter_name(profile), limits, settings.SIMIA_LLM_LIMITS_REDIS_URL)
        return _limiters[key]


def endpoint_limiter_existing(profile) -> EndpointLimiter | None:
    """This process's limiter for a profile if it has sent through one (the newest, when its limits changed)."""
    with _limiters_lock:
        found = [limiter for key, limiter in _limiters.items() if key[:2] == (profile.pk, profile.base_url)]
    return found[-1] if found else None
