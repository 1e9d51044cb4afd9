"""``hyperframes view``: scrub a store or a video in a local web page.

Also the ``--view`` option of long runs: :func:`add_view_options` adds it and
:func:`live_monitor_for` turns it into a monitor for ``Pipeline.run(monitor=...)``.
The viewer (starlette, uvicorn) is imported only when used.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from .common import port_number
from .options import Observe

DEFAULT_PORT = 8765
FORMATS = ("jpeg", "png")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "view",
        help="scrub a store or a video in a local web page",
        description="Serve a read-only page on 127.0.0.1 that scrubs PATH (a store, or a "
        "video packed into a temporary store first), with its timeline and cache figures.",
    )
    p.add_argument("path", help="a store folder or a video file")
    p.add_argument("--port", type=port_number, default=DEFAULT_PORT, help="0 picks a free port")
    p.add_argument(
        "--host",
        default=None,
        help="interface to serve on (default 127.0.0.1); another one exposes the frames to "
        "whoever can reach it",
    )
    p.add_argument(
        "--format", choices=FORMATS, default="jpeg", help="image format (png is lossless)"
    )
    p.add_argument("--start", type=int, default=0, help="a video's first frame to pack")
    p.add_argument("--stop", type=int, default=None, help="one past a video's last frame")
    p.add_argument("--open", action="store_true", help="open the page in a web browser")
    p.set_defaults(run=run_view)


def add_view_options(parser: argparse.ArgumentParser) -> None:
    """``--view [PORT]`` and ``--host`` for a long-running command."""
    parser.add_argument(
        "--view",
        nargs="?",
        type=port_number,
        const=0,
        default=None,
        metavar="PORT",
        help="show live progress in a local web page (PORT, or a free one)",
    )
    parser.add_argument("--host", default=None, help="interface for --view (default 127.0.0.1)")


def live_monitor_for(observe: Observe) -> Any:
    """A started live page's monitor when ``--view`` was given, else ``None``.

    Prints the page's address on stderr. Call ``monitor.close()`` when the run is over.
    """
    if observe.view is None:
        return None
    from ..viewer import start_live_view

    monitor = start_live_view(observe.view, observe.host)
    print(f"hyperframes: live view at {monitor.url}", file=sys.stderr)
    return monitor


def run_view(args: argparse.Namespace) -> int:
    import webbrowser

    from ..metrics.progress import ProgressBar
    from ..viewer import Viewer, bind, open_viewed
    from ..viewer.server import allowed_hosts, is_loopback, resolve_host, serve_forever, url_of

    host, explicit = resolve_host(args.host)
    sock = bind(args.host, args.port)  # before packing: a busy port fails at once
    try:
        bar = ProgressBar(label="pack")
        try:
            viewed = open_viewed(args.path, start=args.start, stop=args.stop, progress=bar)
        finally:
            bar.finish()
        with Viewer(viewed, default_format=args.format, allowed_hosts=allowed_hosts(host)) as v:
            url = url_of(sock)
            print(f"hyperframes: viewing {viewed.name} at {url} (Ctrl-C to stop)", file=sys.stderr)
            if explicit and not is_loopback(host):
                print(f"hyperframes: warning: serving on {host}: not loopback", file=sys.stderr)
            if args.open:
                webbrowser.open(url)
            serve_forever(v.app, sock)
    finally:
        sock.close()
    return 0
