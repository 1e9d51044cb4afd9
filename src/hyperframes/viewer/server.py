"""Serving the viewer: loopback by default, uvicorn in the foreground or on a thread.

The viewer binds 127.0.0.1 unless a host is named explicitly (``--host``); a named
non-loopback host is the only way onto another interface, and :func:`check_bind`
refuses one otherwise. On loopback, requests must also carry a loopback ``Host``
header, which keeps web pages elsewhere from reading frames through DNS rebinding.

The socket is bound in the caller's thread before the server starts, so a port in use
fails at once with a clear error, and port 0 picks a free port that :attr:`url` names.

Example:
    >>> server = BackgroundServer(app, host=None, port=0)  # doctest: +SKIP
    >>> server.start(); server.url  # doctest: +SKIP
    'http://127.0.0.1:41213/'
    >>> server.close()  # doctest: +SKIP
"""

from __future__ import annotations

import socket
import threading
from typing import Any

from ..metrics.hosts import LOOPBACK_NAMES, allowed_hosts, is_loopback
from ._deps import missing

try:
    import uvicorn
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing(exc) from exc

DEFAULT_HOST = "127.0.0.1"
LOOPBACK_HOST_HEADERS = LOOPBACK_NAMES

__all__ = [
    "DEFAULT_HOST",
    "LOOPBACK_HOST_HEADERS",
    "BackgroundServer",
    "allowed_hosts",
    "bind",
    "check_bind",
    "is_loopback",
    "resolve_host",
    "serve_forever",
    "url_of",
]


def check_bind(host: str, *, allow_remote: bool) -> None:
    """Refuse a non-loopback ``host`` unless it was asked for explicitly.

    Raises:
        ValueError: ``host`` is not loopback and ``allow_remote`` is false.
    """
    if not is_loopback(host) and not allow_remote:
        raise ValueError(
            f"refusing to serve on {host!r}: it is not a loopback address, and the viewer "
            f"serves {DEFAULT_HOST} only unless a host is given explicitly (--host {host})"
        )


def resolve_host(host: str | None) -> tuple[str, bool]:
    """The host to bind and whether it was given explicitly (``None``: loopback)."""
    return (DEFAULT_HOST, False) if host is None else (host, True)


def bind(host: str | None, port: int) -> socket.socket:
    """A listening socket on ``host`` (``None``: 127.0.0.1) and ``port`` (0: any free one).

    Raises:
        ValueError: a non-loopback host given implicitly, or a port out of range.
        OSError: the address is in use or cannot be bound.
    """
    address, explicit = resolve_host(host)
    check_bind(address, allow_remote=explicit)
    if not 0 <= port <= 65535:
        raise ValueError(f"port must be in 0..65535, got {port}")
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    return socket.create_server((address.strip("[]"), port), family=family, backlog=64)


def url_of(sock: socket.socket) -> str:
    """The ``http://`` address of a bound socket."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/"


def _server(app: Any) -> uvicorn.Server:
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
    )
    return uvicorn.Server(config)


def serve_forever(app: Any, sock: socket.socket) -> None:
    """Serve ``app`` on ``sock`` in this thread until interrupted (Ctrl-C)."""
    try:
        _server(app).run(sockets=[sock])
    finally:
        sock.close()


class BackgroundServer:
    """Serves an app on a daemon thread (for a live page beside a running pipeline).

    Args:
        app: the ASGI application.
        host: the interface; ``None`` is 127.0.0.1, a named one is taken as explicit.
        port: the port; 0 picks a free one.
    """

    def __init__(self, app: Any, *, host: str | None = None, port: int = 0) -> None:
        self._sock = bind(host, port)
        self.url = url_of(self._sock)
        self._server = _server(app)
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start serving; the socket already listens, so requests queue until then."""
        if self._thread is not None:
            return
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, name="hf-view-server",
            daemon=True,
        )  # fmt: skip
        self._thread.start()

    def close(self) -> None:
        """Stop serving and wait for the server thread."""
        self._server.should_exit = True
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self._sock.close()

    def __repr__(self) -> str:
        return f"BackgroundServer(url={self.url!r}, running={self._thread is not None})"
