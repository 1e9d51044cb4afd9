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

Example:
    >>> app = create_app(frames=FrameServer(store), timeline=Timeline(store))  # doctest: +SKIP
    >>> TestClient(app).get("/api/meta").json()["frames"]  # doctest: +SKIP
    240
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

from .._version import __version__
from ._deps import missing
from .frames import FORMATS, FrameServer, ImageFormat
from .live import LiveMonitor
from .timeline import Timeline

try:
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.trustedhost import TrustedHostMiddleware
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
    from starlette.routing import Route
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise missing(exc) from exc

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
            info = frames.store.info
            body.update(
                frames=len(frames),
                shape=list(info.spec.shape),
                dtype=str(info.spec.dtype),
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
            return PlainTextResponse(f"format must be one of {list(FORMATS)}", status_code=400)
        index = request.path_params["index"]
        try:
            served = frames.get(index, fmt=fmt)
        except IndexError as exc:
            return _not_found(str(exc))
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
        Route("/", page),
        Route("/static/{name}", static),
        Route("/api/meta", meta),
        Route("/api/frame/{index:int}", frame),
        Route("/api/timeline", timeline_route),
        Route("/api/stats", stats),
        Route("/api/live", live_route),
    ]
    middleware = [Middleware(_SecurityHeaders)]
    if allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=list(allowed_hosts)))
    return Starlette(routes=routes, middleware=middleware)
