"""A webhook receiver on loopback: answers each POST with the next scripted status and keeps what it got."""

import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes
    status: int  # what the receiver answered


class WebhookReceiver:
    def __init__(self, statuses=()):
        self.statuses = list(statuses)  # answered in turn; 200 once they run out
        self.received: list[Received] = []
        self._lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver._lock:
                    status = receiver.statuses.pop(0) if receiver.statuses else 200
                    receiver.received.append(Received(dict(self.headers.items()), body, status))
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"down for maintenance" if status >= 500 else b"ok")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/simia"

    def start(self):
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def stop(self):
        self.server.shutdown()
        self.server.server_close()
