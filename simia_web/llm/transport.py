"""The SDK's HTTP transport (httpx2's own), holding the endpoint's limits for exactly the exchange.

The SDK builds the request before the limits are taken, and they are free again as soon as the
answer's bytes are in, before anything parses them: time a busy worker's thread spends waiting for
the GIL outside the exchange does not keep the endpoint's capacity idle.

A transport belongs to one client, which belongs to one thread (see endpoints.endpoint_client): it
keeps one keep-alive connection. Proxies come from the environment (HTTP_PROXY, HTTPS_PROXY,
NO_PROXY), as the SDK's default client would take them.
"""

import functools
import ssl
import time
import urllib.request
from collections.abc import Callable
from contextvars import ContextVar
from typing import cast

import httpx2
import orjson

from .limits import EndpointLimiter
from .slots import Rank

# How long the last exchange of this context held the endpoint, in ms (0 when it never got to send).
exchange_ms: ContextVar[int] = ContextVar("exchange_ms", default=0)
# An idle connection older than this is not reused (httpx2's own default): a NAT or firewall may have
# dropped it without a word, and the next request would wait out its read timeout holding a slot.
KEEPALIVE_EXPIRY = 5.0
_THROTTLED = 429


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for all connections: building one reads the CA bundle (~25 ms)."""
    return httpx2.create_ssl_context()


def environment_proxy(url: httpx2.URL) -> str | None:
    """The proxy the environment names for this URL, or None (also when NO_PROXY exempts its host)."""
    if urllib.request.proxy_bypass(url.host):
        return None
    return urllib.request.getproxies().get(url.scheme)


class LimitedTransport(httpx2.BaseTransport):
    def __init__(self, limiter: EndpointLimiter, rank: Callable[[], Rank]):
        self._limiter = limiter
        self._rank = rank
        self._http: httpx2.HTTPTransport | None = None  # made for the first request's URL (its proxy)

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if self._http is None:
            self._http = httpx2.HTTPTransport(
                verify=tls_context(),
                proxy=environment_proxy(request.url),
                limits=httpx2.Limits(max_connections=1, max_keepalive_connections=1, keepalive_expiry=KEEPALIVE_EXPIRY),
            )
        body = request.read()
        with self._limiter.held(self._rank(), tokens=lambda: _token_estimate(body)) as outcome:
            started, content = time.monotonic(), b""
            try:
                response = self._http.handle_request(request)
                try:
                    # As sent (still encoded): the client decodes it. A sync transport's stream is a sync one.
                    content = b"".join(cast(httpx2.SyncByteStream, response.stream))
                finally:
                    response.close()
            except httpx2.ReadTimeout:
                outcome.timed_out = True  # given up on: the endpoint may still be writing the answer
                raise
            finally:
                took = time.monotonic() - started
                exchange_ms.set(int(took * 1000))
                outcome.measured = (took, len(body), len(content))  # a sample for the adaptive limit
            outcome.succeeded = response.is_success
            if response.status_code == _THROTTLED:
                outcome.throttled, outcome.retry_after = True, _retry_after_seconds(response.headers)
        return httpx2.Response(
            response.status_code,
            headers=response.headers,
            stream=httpx2.ByteStream(content),
            extensions=response.extensions,
            request=request,
        )

    def close(self) -> None:
        if self._http is not None:
            self._http.close()


def _token_estimate(body: bytes) -> int:
    """Tokens a request may use, for a tokens-per-minute limit: its prompt (about 4 bytes a token) and
    the most it may write."""
    try:
        max_tokens = orjson.loads(body).get("max_tokens") or 0
    except (orjson.JSONDecodeError, AttributeError):
        max_tokens = 0
    return len(body) // 4 + int(max_tokens)


def _retry_after_seconds(headers: httpx2.Headers) -> float | None:
    for name, scale in (("retry-after-ms", 0.001), ("retry-after", 1.0)):
        try:
            return float(headers[name]) * scale
        except (KeyError, ValueError):  # absent, or an HTTP date
            continue
    return None
