"""How many requests an endpoint is given at once, adapted to the latency it shows.

The profile's `max_concurrency` is the ceiling. The limit actually allowed in flight follows the
gradient of latency, as in Envoy's adaptive concurrency filter (its "gradient controller":
gradient = minRTT / sampleRTT, new limit = gradient x limit, minRTT measured when the endpoint is
least loaded) and Netflix's concurrency-limits Gradient2Limit (the gradient clamped to [0.5, 1] and a
tolerance before latency counts as risen), with an additive increase in place of their square-root
headroom, and AIMD's halving when a request is dropped:

  https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/adaptive_concurrency_filter
  https://github.com/Netflix/concurrency-limits (Gradient2Limit, VegasLimit)

Each answered request is a sample: its time, and how many requests were in flight when it was sent.

- Its time is divided by its size (bytes sent plus ANSWER_WEIGHT x bytes received, at least
  MIN_WORK_BYTES): one endpoint answers a 50-token question in a second and a 5,000-token prompt in
  a minute, and only time per unit of work says whether requests wait for each other.
- `noload` is the least time per unit seen (the endpoint's minRTT); it drifts up by NOLOAD_DRIFT per
  sample, so that a faster moment long past stops being the yardstick, and any faster sample
  replaces it.
- ratio = time per unit / noload. At or under TOLERANCE (Gradient2's default), latency is flat:
  the limit grows by INCREASE / limit (an additive increase: about INCREASE per `limit` requests),
  unless fewer than half the limit were in flight (Netflix's "app-limited" rule: no evidence that
  more would do). Over it, with two or more in flight when the request was sent (one alone cannot
  have waited for another of ours), the limit becomes the number that was in flight (at most the
  limit) times TOLERANCE / ratio, at least half of it: two rollouts sharing a one-slot server
  bring a limit of 8 down to 1 though they never had 4 in flight.
- A request that timed out, or that the endpoint refused with a 429, halves the limit (a 429 once
  per cool-down, see limits.py).

Why not their own headroom: Envoy adds sqrt(limit) and Gradient2 a queue of 4 to every new limit,
so neither can go below about 4, while llama.cpp's server and llama-cpp-python run one request at
a time by default; a request queued there waits for the whole of the one before it.

On a one-slot server the limit settles between 1 and 2: it falls to 1.5 when a second request
doubled a request's time, and grows back to 2 over a few requests, which is how it would find a
second slot. A server's slots, where it reports them (llama.cpp's /props total_slots) or the
probe measures them (capabilities.py), start the limit there.

The same step is written twice: in Python for a process without Redis (the embedded default:
the state is the process's) and in Lua (`LUA_SAMPLE`), run by Redis inside the script that gives a
lease back, so that every worker of the cluster shares one state and a sample costs no round trip
of its own. tests/llm/test_adaptive.py feeds both the same samples.

`history` keeps the last HISTORY_KEPT changes of the whole number allowed in flight, with the time.
"""

import math
import threading
import time
from collections import deque
from dataclasses import dataclass

TOLERANCE = 1.5
INCREASE = 0.5
MIN_GRADIENT = 0.5
NOLOAD_DRIFT = 0.01
ANSWER_WEIGHT = 4  # writing a token takes several times as long as reading one, on every server we know
MIN_WORK_BYTES = 1000  # a request's own overhead: smaller ones are about as slow as this
HISTORY_KEPT = 100
# An answer faster than this cannot have waited behind another of ours long enough to show the endpoint at capacity (a
# request queued on a one-slot server waits for a whole other answer): it may raise the limit, never lower it. Without
# it, a call held open for long (an RL step's slow simulator answer) made the instant answers sent beside it read as
# latency risen, since time per byte of tiny answers differs by their size alone, and the limit fell to 1.
QUEUE_EVIDENCE_SECONDS = 0.1


@dataclass(frozen=True)
class Sample:
    seconds: float  # the exchange's time, from sending to the last byte of the answer (or to giving up)
    sent: int  # bytes of the request body
    received: int  # bytes of the answer body
    in_flight: int  # requests to the endpoint in flight when this one was sent, itself included
    dropped: bool = False  # timed out: the endpoint could not answer in time

    @property
    def fast(self) -> bool:
        """Too fast to show requests waiting for each other (QUEUE_EVIDENCE_SECONDS)."""
        return self.seconds < QUEUE_EVIDENCE_SECONDS

    @property
    def per_unit(self) -> float:
        """Seconds per 1,000 bytes of work."""
        return self.seconds * 1000 / work_bytes(self.sent, self.received)

    def encoded(self) -> list:
        """As the Lua step reads it: seconds per unit, in flight, and 1 dropped, 2 fast (see `fast`), else 0."""
        return [repr(self.per_unit), self.in_flight, 1 if self.dropped else 2 if self.fast else 0]


def work_bytes(sent: int, received: int = 0) -> int:
    return max(MIN_WORK_BYTES, sent + ANSWER_WEIGHT * received)


def next_limit(limit: float, noload: float, ceiling: int, sample: Sample) -> tuple[float, float]:
    """(limit, noload) after one sample. `noload` 0 means none seen yet."""
    if sample.dropped:
        return max(1.0, limit / 2), noload
    per_unit = sample.per_unit
    noload = per_unit if noload <= 0 else min(per_unit, noload * (1 + NOLOAD_DRIFT))
    ratio = per_unit / noload if noload > 0 else 1.0
    if ratio <= TOLERANCE:
        if 2 * sample.in_flight < limit:
            return limit, noload
        return min(float(ceiling), limit + INCREASE / limit), noload
    if sample.in_flight < 2 or sample.fast:
        return limit, noload
    return max(1.0, min(limit, sample.in_flight) * max(MIN_GRADIENT, TOLERANCE / ratio)), noload


def allowed(limit: float) -> int:
    """Requests allowed in flight under a limit."""
    return max(1, math.floor(limit + 1e-9))


# The same step in Lua, for the release script: reads KEYS[2] (the limit), KEYS[5] (a hash: noload) and writes
# KEYS[6] (the history list) when the whole number allowed changes. The script sets `ceiling`, `memory_ms` and `now_ms`
# (Redis allows a script no globals).
LUA_SAMPLE = f"""
local ceiling, memory_ms, now_ms = 0, 0, 0
local function adapt(limit, per_unit, in_flight, dropped, noload)
  if dropped == 1 then return math.max(1, limit / 2), noload end
  if noload <= 0 then noload = per_unit else noload = math.min(per_unit, noload * (1 + {NOLOAD_DRIFT})) end
  local ratio = 1
  if noload > 0 then ratio = per_unit / noload end
  if ratio <= {TOLERANCE} then
    if 2 * in_flight < limit then return limit, noload end
    return math.min(ceiling, limit + {INCREASE} / limit), noload
  end
  if in_flight < 2 or dropped == 2 then return limit, noload end
  return math.max(1, math.min(limit, in_flight) * math.max({MIN_GRADIENT}, {TOLERANCE} / ratio)), noload
end
local function allowed(limit) return math.max(1, math.floor(limit + 1e-9)) end
local function note_limit(before, after, always)
  if always or allowed(before) ~= allowed(after) then
    redis.call('LPUSH', KEYS[6], now_ms .. ':' .. string.format('%.3f', after))
    redis.call('LTRIM', KEYS[6], 0, {HISTORY_KEPT - 1})
  end
  redis.call('PEXPIRE', KEYS[6], memory_ms)
  redis.call('SET', KEYS[2], string.format('%.6f', after), 'PX', memory_ms)
end
"""


class LocalAdaptive:
    """The adaptive state of one process (no Redis): the limit, noload, and the history of changes."""

    def __init__(self, ceiling: int, start: float | None = None):
        self.ceiling = ceiling
        self.limit = float(min(ceiling, start or ceiling))
        self.noload = 0.0
        self.history: deque[tuple[float, float]] = deque(maxlen=HISTORY_KEPT)
        self._lock = threading.Lock()

    def sample(self, sample: Sample) -> float:
        with self._lock:
            before = self.limit
            self.limit, self.noload = next_limit(self.limit, self.noload, self.ceiling, sample)
            self._note(before)
            return self.limit

    def succeeded(self, count: int = 1) -> None:
        """Answers without a measured time: the additive increase alone (as after a 429)."""
        with self._lock:
            before = self.limit
            for _ in range(count):
                self.limit = min(float(self.ceiling), self.limit + 1 / self.limit)
            self._note(before)

    def halve(self) -> None:
        with self._lock:
            before = self.limit
            self.limit = max(1.0, self.limit / 2)
            self._note(before)

    def start_at(self, limit: float, noload: float = 0.0) -> None:
        with self._lock:
            before = self.limit
            self.limit = float(max(1, min(self.ceiling, limit)))
            if noload > 0 and (self.noload <= 0 or noload < self.noload):
                self.noload = noload
            self._note(before, always=True)

    def allowed(self) -> int:
        return allowed(self.limit)

    def snapshot(self) -> dict:
        with self._lock:
            history = [{"at": at, "limit": limit} for at, limit in self.history]  # oldest first
            return {"limit": self.limit, "ceiling": self.ceiling, "noload": self.noload, "history": history}

    def _note(self, before: float, *, always: bool = False) -> None:
        if always or allowed(before) != allowed(self.limit):
            self.history.append((time.time(), self.limit))
