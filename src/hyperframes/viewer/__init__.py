"""A local web viewer: scrub a store or a video, and watch a run live.

``hyperframes view PATH`` serves a page on 127.0.0.1 with a frame scrubber, a timeline
of hyperframe boundaries and adjacent MSE, and the cache figures; a long run started
with ``--view`` shows its live progress on the same page. Read-only: the paths are
fixed at start and every asset ships in the package. Needs the ``view`` extra
(starlette and uvicorn).

- :mod:`.source`: opening a store, or packing a video into a temporary store.
- :mod:`.frames`: frames encoded for the page, with per-tier figures.
- :mod:`.timeline`: boundaries and the adjacent-MSE curve.
- :mod:`.live`: :class:`LiveMonitor`, a run's figures for the page.
- :mod:`.app`: the routes; :mod:`.server`: binding and serving.

Example:
    >>> monitor = start_live_view()  # doctest: +SKIP
    >>> print(monitor.url)  # doctest: +SKIP
    http://127.0.0.1:41213/
    >>> Pipeline.from_source(src).map(f).to(sink).run(monitor=monitor)  # doctest: +SKIP
    >>> monitor.close()  # doctest: +SKIP
"""

from __future__ import annotations

from .app import create_app
from .frames import FORMATS, FrameServer, ImageFormat
from .live import LiveMonitor
from .server import BackgroundServer, allowed_hosts, bind, check_bind, is_loopback, resolve_host
from .session import Viewer
from .source import Viewed, open_viewed
from .timeline import Timeline

__all__ = [
    "FORMATS",
    "BackgroundServer",
    "FrameServer",
    "ImageFormat",
    "LiveMonitor",
    "Timeline",
    "Viewed",
    "Viewer",
    "bind",
    "check_bind",
    "create_app",
    "is_loopback",
    "open_viewed",
    "start_live_view",
]


def start_live_view(port: int = 0, host: str | None = None) -> LiveMonitor:
    """Serve a live page for the next run(s) and return the monitor to pass to ``run``.

    Args:
        port: the port; 0 picks a free one (see ``monitor.url``).
        host: the interface; ``None`` is 127.0.0.1. A host named here counts as asked
            for explicitly, so it may be non-loopback (the CLI passes ``--host`` only).

    Returns:
        A :class:`LiveMonitor` whose ``url`` is the page and whose ``close()`` stops it.

    Raises:
        OSError: the port is in use.
    """
    monitor = LiveMonitor()
    address, _ = resolve_host(host)
    app = create_app(live=monitor, name="live run", allowed_hosts=allowed_hosts(address))
    server = BackgroundServer(app, host=host, port=port)
    server.start()
    monitor.attach(server.url, server.close)
    return monitor
