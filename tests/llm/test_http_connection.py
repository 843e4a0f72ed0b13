"""The LLM client's transport (httpx2's, under the endpoint's limits) against a raw loopback server:
keep-alive, closed connections, encodings, proxies."""

import gzip
import socket
import ssl
import threading

import httpx2
import pytest
import trustme

from simia_web.llm import transport
from simia_web.llm.limits import EndpointLimiter, EndpointLimits
from simia_web.llm.slots import first_come
from simia_web.llm.transport import LimitedTransport, exchange_ms


class RawServer:
    """Accepts connections on loopback and answers each request with the next scripted behaviour.

    A behaviour is bytes to send back (then the connection stays open), or the same followed by
    closing the connection (`close=True`), or closing without any answer (None).
    """

    def __init__(self, tls: ssl.SSLContext | None = None):
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.tls = tls
        self.connections = 0
        self.requests: list[bytes] = []
        self.script: list[tuple[bytes | None, bool]] = []
        self.closed = threading.Semaphore(0)  # released each time the server closes a connection
        threading.Thread(target=self._serve, daemon=True).start()

    @property
    def url(self) -> str:
        scheme = "https" if self.tls else "http"
        return f"{scheme}://localhost:{self.sock.getsockname()[1]}/v1/chat/completions"

    def answer(self, body: bytes, *, headers: str = "", close: bool = False) -> None:
        head = f"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{headers}\r\n"
        self.script.append((head.encode() + body, close))

    def hang_up(self) -> None:
        self.script.append((None, True))

    def _serve(self):
        while True:
            conn, _ = self.sock.accept()
            self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn):
        try:
            if self.tls:
                conn = self.tls.wrap_socket(conn, server_side=True)
            self._converse(conn)
        except OSError:
            pass  # the client hung up: mid-handshake when it does not trust the certificate, or with data unread
        finally:
            conn.close()
            self.closed.release()

    def _converse(self, conn):
        buffer = b""
        while True:
            while b"\r\n\r\n" not in buffer:
                data = conn.recv(65536)
                if not data:
                    return
                buffer += data
            head, _, buffer = buffer.partition(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1]) for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")
            )
            while len(buffer) < length:
                buffer += conn.recv(65536)
            self.requests.append(head + b"\r\n\r\n" + buffer[:length])
            buffer = buffer[length:]
            response, close = self.script.pop(0)
            if response is not None:
                conn.sendall(response)
            if close:
                return


@pytest.fixture
def server():
    return RawServer()


def _client(limiter: EndpointLimiter | None = None, timeout: float = 5) -> httpx2.Client:
    limiter = limiter or EndpointLimiter("http-test", EndpointLimits(concurrency=1))
    return httpx2.Client(transport=LimitedTransport(limiter, lambda: first_come), timeout=timeout)


@pytest.fixture
def http():
    client = _client()
    yield client
    client.close()


def test_requests_share_one_keep_alive_connection(server, http):
    server.answer(b'{"n": 1}')
    server.answer(b'{"n": 2}')
    assert http.post(server.url, json={"a": 1}).json() == {"n": 1}
    assert http.post(server.url, json={"a": 2}).json() == {"n": 2}
    assert server.connections == 1
    assert server.requests[1].endswith(b'{"a":2}')
    assert b"host: localhost:" in server.requests[0].lower()  # the client's Host header, sent once


def test_a_connection_the_server_closed_while_idle_is_replaced(server, http):
    server.answer(b'{"n": 1}', close=True)  # no Connection: close header, just gone afterwards
    server.answer(b'{"n": 2}')
    assert http.post(server.url, json={}).json() == {"n": 1}
    assert server.closed.acquire(timeout=5)
    assert http.post(server.url, json={}).json() == {"n": 2}
    assert server.connections == 2


def test_connection_close_is_honoured(server, http):
    server.answer(b'{"n": 1}', headers="connection: close\r\n", close=True)
    server.answer(b'{"n": 2}')
    assert http.post(server.url, json={}).json() == {"n": 1}
    assert http.post(server.url, json={}).json() == {"n": 2}
    assert server.connections == 2


def test_a_compressed_answer_is_decoded(server, http):
    server.answer(gzip.compress(b'{"n": 3}'), headers="content-encoding: gzip\r\n")
    assert http.post(server.url, json={}).json() == {"n": 3}


def test_a_hang_up_without_an_answer_is_a_protocol_error_and_the_next_request_reconnects(server, http):
    server.hang_up()
    server.answer(b'{"n": 4}')
    with pytest.raises(httpx2.RemoteProtocolError):
        http.post(server.url, json={})
    assert http.post(server.url, json={}).json() == {"n": 4}
    assert server.connections == 2


def test_a_silent_server_is_a_read_timeout_and_frees_the_slot(server):
    limiter = EndpointLimiter("http-test", EndpointLimits(concurrency=1))
    client = _client(limiter, timeout=0.2)
    server.script.append((b"", False))  # reads the request, never answers
    with pytest.raises(httpx2.ReadTimeout):
        client.post(server.url, json={})
    assert exchange_ms.get() >= 200
    with limiter.held(first_come, tokens=lambda: 1):  # the slot came back: this would block otherwise
        pass


def test_nothing_listening_is_a_connect_error(http):
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    with pytest.raises(httpx2.ConnectError):
        http.post(f"http://127.0.0.1:{port}/v1/chat/completions", json={})


def test_https_verifies_the_server_certificate(http, monkeypatch):
    ca = trustme.CA()
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server_tls)
    server = RawServer(tls=server_tls)
    server.answer(b'{"n": 5}')
    server.answer(b'{"n": 6}')
    with pytest.raises(httpx2.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        http.post(server.url, json={})  # the default trust store does not know this CA

    client_tls = ssl.create_default_context()
    ca.configure_trust(client_tls)
    monkeypatch.setattr(transport, "tls_context", lambda: client_tls)
    trusting = _client()
    assert trusting.post(server.url, json={}).json() == {"n": 5}
    assert trusting.post(server.url, json={}).json() == {"n": 6}


def test_an_interim_answer_is_skipped_for_the_final_one(server, http):
    interim = b"HTTP/1.1 103 Early Hints\r\nlink: </style.css>\r\n\r\n"
    final = b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 8\r\n\r\n{"n": 1}'
    server.script.append((interim + final, False))
    server.answer(b'{"n": 2}')
    assert http.post(server.url, json={}).json() == {"n": 1}
    assert http.post(server.url, json={}).json() == {"n": 2}
    assert server.connections == 1


def test_header_values_may_be_latin_1(server, http):
    server.answer(b'{"n": 1}', headers="x-note: caf\xe9\r\n")
    response = http.post(server.url, json={})
    assert response.json() == {"n": 1}
    assert response.headers["x-note"] == "caf\xe9"


def test_a_connection_idle_past_the_keep_alive_expiry_is_not_reused(server, http, monkeypatch):
    monkeypatch.setattr(transport, "KEEPALIVE_EXPIRY", 0.0)
    server.answer(b'{"n": 1}')
    server.answer(b'{"n": 2}')
    http.post(server.url, json={})
    http.post(server.url, json={})
    assert server.connections == 2


def test_a_proxy_named_by_the_environment_is_used_unless_no_proxy_exempts_the_host(server, monkeypatch):
    """The proxy here is the raw server itself: a proxied request names the whole URL in its request line."""
    proxy = f"http://127.0.0.1:{server.sock.getsockname()[1]}"
    monkeypatch.setenv("HTTP_PROXY", proxy)
    monkeypatch.setenv("NO_PROXY", "")
    target = "http://llm.invalid/v1/chat/completions"
    server.answer(b'{"n": 1}')
    assert _client().post(target, json={}).json() == {"n": 1}
    assert server.requests[0].startswith(b"POST http://llm.invalid/v1/chat/completions HTTP/1.1")
    monkeypatch.setenv("NO_PROXY", "localhost")
    assert transport.environment_proxy(httpx2.URL(server.url)) is None
    assert transport.environment_proxy(httpx2.URL(target)) == proxy
