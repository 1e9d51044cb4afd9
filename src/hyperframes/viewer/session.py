"""``Viewer``: one viewed sequence wired to its page (frames, timeline, live figures).

Example:
    >>> viewer = Viewer(open_viewed("clip.hfs"), default_format="png")  # doctest: +SKIP
    >>> TestClient(viewer.app).get("/api/frame/0").headers["x-tier"]  # doctest: +SKIP
    'cold'
    >>> viewer.close()  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Sequence
from types import TracebackType

from .app import create_app
from .frames import FrameServer, ImageFormat
from .live import LiveMonitor
from .source import Viewed
from .timeline import Timeline


class Viewer:
    """A viewed sequence, its frame server and timeline, and the ASGI app over them.

    Starts the timeline's background MSE computation when the curve is not known.

    Args:
        viewed: what to show (closed by :meth:`close`).
        default_format: ``"jpeg"`` or ``"png"`` (lossless).
        live: a monitor whose run the page also shows.
        allowed_hosts: accepted ``Host`` headers (``None``: any).
    """

    def __init__(
        self,
        viewed: Viewed,
        *,
        default_format: ImageFormat = "jpeg",
        live: LiveMonitor | None = None,
        allowed_hosts: Sequence[str] | None = None,
    ) -> None:
        self.viewed = viewed
        self.frames = FrameServer(viewed.store)
        self.timeline = Timeline(viewed.store, distances=viewed.distances)
        self.app = create_app(
            frames=self.frames, timeline=self.timeline, live=live, name=viewed.name,
            default_format=default_format, allowed_hosts=allowed_hosts,
        )  # fmt: skip
        self.timeline.start()

    def close(self) -> None:
        """Stop the timeline's computation and close the viewed store."""
        self.timeline.close()
        self.viewed.close()

    def __enter__(self) -> Viewer:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"Viewer({self.viewed!r})"
