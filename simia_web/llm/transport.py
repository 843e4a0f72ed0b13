"""HTTP/1.1 under the SDK: the standard library's http.client behind httpx2's transport interface.

On a busy worker, CPU and not the network decides how fast an endpoint's slots turn over, and the
SDK's default transport (httpcore2 + h11) spends three times the CPU of http.client on an exchange
(0.74 against 0.23 ms for a chat completion here). The SDK keeps building requests, applying
timeouts, raising its error classes and parsing answers as before: this only moves bytes.

A transport belongs to one client, which belongs to one thread (see client._openai_client): it keeps
one keep-alive connection and needs no lock.
"""

import functools
import http.client
import select
import ssl
import time
from collections.abc import Callable
from contextvars import ContextVar

import httpx2

from .slots import Rank, Slots

# How long the last exchange of this context held its slot, in ms (0 when it never got to send).
exchange_ms: ContextVar[int] = ContextVar("exchange_ms", default=0)
# An idle connection older than this is not reused (httpx2's own default): a NAT or firewall may have
# dropped it without a word, and the next request would wait out its read timeout holding a slot.
KEEPALIVE_EXPIRY = 5.0
_HTTP_VERSIONS = {10: b"HTTP/1.0", 11: b"HTTP/1.1"}


@functools.cache
def tls_context() -> ssl.SSLContext:
    """One TLS context for all connections: building one reads the CA bundle (~25 ms)."""
    return httpx2.create_ssl_context()


class SlotTransport(httpx2.BaseTransport):
    """Holds one of the endpoint's concurrency slots for exactly the HTTP exchange.

    The SDK builds the request before the slot is taken, and the slot is free again as soon as the
    answer's bytes are in, before anything parses them: time a busy worker's thread spends waiting for
    the GIL outside the exchange does not keep the endpoint's capacity idle.
    """

    def __init__(self, slots: Slots, rank: Callable[[], Rank]):
        self._slots = slots
        self._rank = rank
        self._connection: http.client.HTTPConnection | None = None
        self._origin: tuple | None = None
        self._idle_since = 0.0

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        body = request.read()
        timeouts = request.extensions.get("timeout") or {}
        with self._slots.taken(self._rank()):
            started = time.monotonic()
            try:
                response, content = self._exchange(request, body, timeouts)
            finally:
                exchange_ms.set(int((time.monotonic() - started) * 1000))
        return httpx2.Response(
            response.status,
            # As bytes: header values may be any latin-1 text, which httpx2 would encode as ASCII.
            headers=[(name.encode("latin-1"), value.encode("latin-1")) for name, value in response.getheaders()],
            stream=httpx2.ByteStream(content),  # decoded (gzip and the like) when the client reads it
            extensions={
                "http_version": _HTTP_VERSIONS.get(response.version, b"HTTP/1.1"),
                "reason_phrase": response.reason.encode("latin-1"),
            },
            request=request,
        )

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _exchange(self, request: httpx2.Request, body: bytes, timeouts: dict):
        connection = self._connection_for(request, timeouts)
        try:
            connection.sock.settimeout(timeouts.get("read"))
            connection.putrequest(
                request.method, request.url.raw_path.decode("ascii"), skip_host=True, skip_accept_encoding=True
            )
            for name, value in _headers_for(request, body):
                connection.putheader(name, value)
            connection.endheaders(body)
            response = connection.getresponse()
            content = response.read()
        except TimeoutError as exc:
            self.close()
            raise httpx2.ReadTimeout(f"no complete answer within {timeouts.get('read')} s", request=request) from exc
        except http.client.HTTPException as exc:  # before OSError: RemoteDisconnected is both
            self.close()
            raise httpx2.RemoteProtocolError(f"{type(exc).__name__}: {exc}", request=request) from exc
        except OSError as exc:
            self.close()
            raise httpx2.ReadError(f"{type(exc).__name__}: {exc}", request=request) from exc
        except BaseException:  # interrupted mid-exchange (a task time limit, say): the connection is unusable
            self.close()
            raise
        if response.status < 200:  # http.client skips only 100 Continue; the real answer would follow
            self.close()
            raise httpx2.RemoteProtocolError(f"unexpected interim answer {response.status}", request=request)
        if response.will_close:  # the server said Connection: close, or HTTP/1.0
            self.close()
        self._idle_since = time.monotonic()
        return response, content

    def _connection_for(self, request: httpx2.Request, timeouts: dict) -> http.client.HTTPConnection:
        url = request.url
        origin = (url.scheme, url.host, url.port)
        if self._connection is not None and (
            origin != self._origin
            or time.monotonic() - self._idle_since > KEEPALIVE_EXPIRY
            or _dropped(self._connection)
        ):
            self.close()
        if self._connection is None:
            self._connection = self._connect(request, timeouts)
            self._origin = origin
        return self._connection

    def _connect(self, request: httpx2.Request, timeouts: dict) -> http.client.HTTPConnection:
        url = request.url
        https = url.scheme == "https"
        port = url.port or (443 if https else 80)  # given, or "::1" would be read as host and port
        if https:
            connection = http.client.HTTPSConnection(
                url.host, port, timeout=timeouts.get("connect"), context=tls_context()
            )
        else:
            connection = http.client.HTTPConnection(url.host, port, timeout=timeouts.get("connect"))
        try:
            connection.connect()
        except TimeoutError as exc:
            raise httpx2.ConnectTimeout(f"no connection within {timeouts.get('connect')} s", request=request) from exc
        except OSError as exc:  # refused, unreachable, TLS failures (ssl.SSLError is an OSError)
            raise httpx2.ConnectError(f"{type(exc).__name__}: {exc}", request=request) from exc
        return connection


def _headers_for(request: httpx2.Request, body: bytes) -> list[tuple[bytes, bytes]]:
    """The request's headers as the SDK set them (Host, Content-Length...), for a body sent whole.

    A body given as a stream has its length only once read; httpx2 announced it as chunked.
    """
    headers = request.headers.raw
    if "transfer-encoding" in request.headers:
        headers = [(k, v) for k, v in headers if k.lower() != b"transfer-encoding"]
        headers.append((b"Content-Length", str(len(body)).encode()))
    return headers


def _dropped(connection: http.client.HTTPConnection) -> bool:
    """Whether an idle keep-alive connection was closed by the server (readable means EOF or junk)."""
    if connection.sock is None:
        return True
    poller = select.poll()
    poller.register(connection.sock, select.POLLIN)
    return bool(poller.poll(0))
