"""The viewer's routes: the page, its assets, frames and figures, read-only.

Routes (``GET`` only; anything else is 404, or 405 for another method on a route):

- ``/``: the page; ``/static/{name}``: its script and style, from a fixed table of
  files shipped in the package (a request never names a file on disk).
- ``/api/meta``: what is shown (frames, shape, fps, formats).
- ``/api/frame/{index}?format=jpeg|png``: one frame; headers ``X-Frame-Index``,
  ``X-Timestamp``, ``X-Tier``, ``X-Fetch-Ms``, ``X-Encode-Ms``.
- ``/api/timeline``: boundaries and the binned adjacent-MSE curve.
- ``/api/stats``: cache tiers and fetch times.
- ``/api/live``: a watched run's figures (``{"state": "none"}`` without a monitor).

Every request is answered with a status and a one-line ``text/plain`` reason, never a
traceback: 400 for a bad query (an unknown format, an index no store can hold), 404 for
a frame that does not exist, 500 for a frame that cannot be read (a damaged store says
so and names ``hyperframes verify``). A failure is also logged as one line on the
``hyperframes.viewer`` logger. A ``Host`` header other than the allowed ones gets 400.

Example:
    >>> app = create_app(frames=FrameServer(store), timeline=Timeline(store))  # doctest: +SKIP
    >>> TestClient(app).get("/api/meta").json()["frames"]  # doctest: +SKIP
    240
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from importlib import resources
from typing import Any

from .._version import __version__
from ..errors import StoreCorrupt, StoreError
from ..metrics.hosts import host_allowed
from ._deps import missing
from .frames import FORMATS, EncodeError, FrameServer, ImageFormat
from .live import LiveMonitor
from .timeline import Timeline

try:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing(exc) from exc

log = logging.getLogger("hyperframes.viewer")

MAX_INDEX = (1 << 63) - 1
"""The largest frame index a request may name (int64); larger ones are refused (400)."""
_MAX_INDEX_DIGITS = len(str(MAX_INDEX))

ASSETS: dict[str, str] = {
    "viewer.js": "text/javascript; charset=utf-8",
    "viewer.css": "text/css; charset=utf-8",
}
"""Every file ``/static/`` serves, with its media type; nothing else is ever read."""

SECURITY_HEADERS: list[tuple[bytes, bytes]] = [
    (
        b"content-security-policy",
        b"default-src 'self'; img-src 'self' blob: data:; object-src 'none'; "
        b"base-uri 'none'; frame-ancestors 'none'; form-action 'none'",
    ),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]


class _SecurityHeaders:
    """ASGI middleware adding :data:`SECURITY_HEADERS` to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = [h for h in message.get("headers", []) if h[0] != b"cache-control"]
                message["headers"] = headers + SECURITY_HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


def load_assets() -> dict[str, bytes]:
    """The page and its assets, read once from the package."""
    folder = resources.files("hyperframes.viewer") / "static"
    names = ["index.html", *ASSETS]
    return {name: (folder / name).read_bytes() for name in names}


def _not_found(detail: str = "not found") -> PlainTextResponse:
    return PlainTextResponse(detail, status_code=404)


def _bad_request(detail: str) -> PlainTextResponse:
    return PlainTextResponse(detail, status_code=400)


def _one_line(text: object, limit: int = 300) -> str:
    """``text`` on one line, cut to ``limit`` characters (for a status body or a log)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def parse_index(text: str) -> int | None:
    """The frame index a path segment names; ``None`` if it is not a whole number.

    Only ASCII digits count (``int`` would also take ``"+1"``, ``" 1"``, ``"1_0"`` and
    other scripts' digits), and the length is checked before converting, so a number of
    thousands of digits never reaches ``int`` (whose digit limit raises ``ValueError``).

    Raises:
        ValueError: a whole number over :data:`MAX_INDEX` (a bad request, not a missing frame).
    """
    if not text or not text.isascii() or not text.isdigit():
        return None
    digits = text.lstrip("0") or "0"
    if len(digits) > _MAX_INDEX_DIGITS or int(digits) > MAX_INDEX:
        shown = text if len(text) <= 24 else f"{text[:8]}... ({len(text)} digits)"
        raise ValueError(f"frame index {shown} is too large")
    return int(digits)


class _HostCheck:
    """ASGI middleware answering 400 to a request whose ``Host`` is not allowed."""

    def __init__(self, app: ASGIApp, allowed: Sequence[str]) -> None:
        self.app = app
        self.allowed = list(allowed)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            host = next((v for k, v in scope.get("headers", ()) if k == b"host"), b"")
            if not host_allowed(host.decode("latin-1"), self.allowed):
                if scope["type"] == "websocket":  # refused before the handshake: 403
                    await send({"type": "websocket.close", "code": 1008})
                    return
                reason = f"invalid host header: use one of {', '.join(self.allowed)}"
                await PlainTextResponse(reason, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def _failed(reason: str) -> PlainTextResponse:
    """A 500 answer with ``reason`` (one line), also logged as one line."""
    reason = _one_line(reason)
    log.warning("viewer: %s", reason)
    return PlainTextResponse(reason, status_code=500)


def _guarded(handler: Callable[[Request], Response]) -> Callable[[Request], Response]:
    """``handler``, answering 500 with one line instead of raising on an unexpected error."""

    @functools.wraps(handler)
    def run(request: Request) -> Response:
        try:
            return handler(request)
        except Exception as exc:  # a bug: one line here, the traceback only at debug level
            log.debug("viewer: %s failed", request.url.path, exc_info=True)
            return _failed(f"{request.url.path} failed: {type(exc).__name__}: {exc}")

    return run


def create_app(
    *,
    frames: FrameServer | None = None,
    timeline: Timeline | None = None,
    live: LiveMonitor | None = None,
    name: str = "",
    default_format: ImageFormat = "jpeg",
    allowed_hosts: Sequence[str] | None = None,
) -> Starlette:
    """The viewer as an ASGI application.

    Args:
        frames: the frames to scrub (``None``: a live page only).
        timeline: the timeline of those frames.
        live: a monitor whose run the page shows.
        name: what the page calls the sequence.
        default_format: the image format the page starts with.
        allowed_hosts: accepted ``Host`` headers (defends a loopback server against DNS
            rebinding); ``None`` accepts any.

    Raises:
        ValueError: an unknown default format.
    """
    if default_format not in FORMATS:
        raise ValueError(f"default_format must be one of {list(FORMATS)}, got {default_format!r}")
    assets = load_assets()

    def page(request: Request) -> Response:
        return HTMLResponse(assets["index.html"])

    def static(request: Request) -> Response:
        asset = request.path_params["name"]
        if asset not in ASSETS:
            return _not_found()
        return Response(assets[asset], media_type=ASSETS[asset])

    def meta(request: Request) -> Response:
        body: dict[str, Any] = {
            "name": name,
            "version": __version__,
            "formats": list(FORMATS),
            "format": default_format,
            "has_frames": frames is not None,
            "live": live is not None,
        }
        if frames is not None:
            info, pixels = frames.store.info, frames.store.header.pixels
            body.update(
                frames=len(frames),
                shape=list(info.spec.shape),
                dtype=str(info.spec.dtype),
                size=f"{pixels['width']}x{pixels['height']} {pixels['layout']}"
                if pixels  # a store of planes: the video's size and layout
                else info.spec.describe(),
                fps=info.fps,
                tier=info.tier,
                complete=info.complete,
                hyperframes=len(frames.store.groups),
            )
        return JSONResponse(body)

    def frame(request: Request) -> Response:
        if frames is None:
            return _not_found("no frames are served here")
        fmt = request.query_params.get("format", default_format)
        if fmt not in FORMATS:
            return _bad_request(f"format must be one of {list(FORMATS)}")
        try:
            index = parse_index(request.path_params["index"])
        except ValueError as exc:
            return _bad_request(f"{exc}; valid indices: 0..{len(frames) - 1}")
        if index is None:  # not a number: no such route, as for any other unknown path
            return _not_found()
        try:
            served = frames.get(index, fmt=fmt)
        except IndexError as exc:
            return _not_found(str(exc))
        except StoreCorrupt as exc:
            return _failed(
                f"frame {index} cannot be read: the store is damaged; run `hyperframes verify "
                f"{name or 'STORE'}` to list the damaged frames ({exc})"
            )
        except StoreError as exc:
            return _failed(f"frame {index} cannot be read: {_one_line(exc)}")
        except EncodeError as exc:
            return _failed(f"frame {index} cannot be shown: {_one_line(exc)}")
        headers = {
            "x-frame-index": str(served.index),
            "x-timestamp": "" if served.timestamp is None else f"{served.timestamp:.6f}",
            "x-tier": served.tier,
            "x-fetch-ms": f"{served.fetch_ms:.3f}",
            "x-encode-ms": f"{served.encode_ms:.3f}",
        }
        return Response(served.data, media_type=served.media_type, headers=headers)

    def timeline_route(request: Request) -> Response:
        if timeline is None:
            return _not_found("no timeline here")
        return JSONResponse(timeline.to_dict())

    def stats(request: Request) -> Response:
        if frames is None:
            return _not_found("no frames are served here")
        return JSONResponse(frames.stats())

    def live_route(request: Request) -> Response:
        return JSONResponse(live.view() if live is not None else {"state": "none"})

    routes = [
        Route(path, _guarded(handler))
        for path, handler in [
            ("/", page),
            ("/static/{name}", static),
            ("/api/meta", meta),
            ("/api/frame/{index}", frame),
            ("/api/timeline", timeline_route),
            ("/api/stats", stats),
            ("/api/live", live_route),
        ]
    ]
    middleware = [Middleware(_SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(Middleware(_HostCheck, allowed=list(allowed_hosts)))
    return Starlette(routes=routes, middleware=middleware)
