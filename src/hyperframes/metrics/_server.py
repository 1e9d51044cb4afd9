"""The HTTP server under the metrics endpoint: a thread per connection, bounded.

At most :data:`CONNECTIONS` connections are served at once (more are closed at once: a
scrape takes milliseconds), an idle connection is closed after :data:`IDLE_S`, and the
listen backlog is deep enough for a burst of scrapers. Requests leave no log line.
"""

from __future__ import annotations

import socket
import sys
import threading
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer

CONNECTIONS = 16
"""The most connections served at once; more are closed at once (a scrape takes ms)."""
IDLE_S = 5.0
"""A connection that sends nothing for this long is closed, and its thread ends."""


class QuietHandler(WSGIRequestHandler):
    """Serves requests without a log line on stderr per scrape; idle connections time out."""

    timeout = IDLE_S

    def log_message(self, format: str, *args: Any) -> None:
        return None


class ThreadingServer(ThreadingMixIn, WSGIServer):
    """One thread per connection, at most :data:`CONNECTIONS` at once, a deep backlog."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self._slots = threading.BoundedSemaphore(CONNECTIONS)
        super().__init__(*args, **kwargs)

    def process_request(self, request: Any, client_address: Any) -> None:
        if not self._slots.acquire(blocking=False):
            self.shutdown_request(request)  # too many at once: refuse, hold no thread
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._slots.release()
            raise

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], TimeoutError | ConnectionError):
            return  # an idle connection timed out, or the client went away: nothing to say
        super().handle_error(request, client_address)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._slots.release()


class ThreadingServer6(ThreadingServer):
    address_family = socket.AF_INET6


def server_class(host: str) -> type[WSGIServer]:
    return ThreadingServer6 if ":" in host else ThreadingServer
