"""Which ``Host`` headers a local HTTP server accepts: the DNS-rebinding defence.

A page on another site can make a browser resolve its own name to 127.0.0.1 and then
read a loopback server as if it were same-origin; the only trace of this is the
``Host`` header, which still names the other site. So a server bound to a loopback
address accepts only ``localhost``, ``127.0.0.1`` and the address it is bound to (such
as ``[::1]``), with or without a port. A server bound to another address
was put there on purpose (``--host``, ``--metrics-host``), where clients use names we
cannot know, so it accepts any ``Host``.

Both the viewer and the Prometheus endpoint use these functions; they live here, in a
module with no dependency, so the metrics code never imports the viewer.

Example:
    >>> hosts = allowed_hosts("127.0.0.1")
    >>> host_allowed("localhost:8765", hosts), host_allowed("evil.example", hosts)
    (True, False)
    >>> host_allowed("evil.example", allowed_hosts("0.0.0.0"))
    True
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable

LOOPBACK_NAMES = ("127.0.0.1", "localhost")
"""``Host`` names every loopback server accepts besides its own address."""
MAX_HOST_CHARS = 255


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address, or ``localhost``) is a loopback interface."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False  # another host name: it may resolve anywhere


def _name(host: str) -> str:
    """``host`` lower-cased, without IPv6 brackets."""
    return host.strip().strip("[]").lower()


def allowed_hosts(host: str) -> list[str] | None:
    """``Host`` names to accept for a server bound to ``host`` (``None``: any).

    A loopback bind accepts ``127.0.0.1``, ``localhost`` and its own address (``::1``
    on an IPv6 one); any other bind accepts any name.
    """
    if not is_loopback(host):
        return None
    return sorted({*LOOPBACK_NAMES, _name(host)})


def split_host(header: str) -> str | None:
    """The name in a ``Host`` header value, without the port; ``None`` if malformed.

    ``"localhost:8765"`` gives ``"localhost"``, ``"[::1]:80"`` gives ``"::1"``.
    """
    value = header.strip().lower()
    if not value or len(value) > MAX_HOST_CHARS:
        return None
    if value.startswith("["):
        name, bracket, port = value[1:].partition("]")
        if not bracket or (port and not port.startswith(":")):
            return None
        port = port[1:]
    else:
        name, _, port = value.partition(":")
    if not name or not (port == "" or (port.isascii() and port.isdigit())):
        return None
    return name


def host_allowed(header: str | None, allowed: Iterable[str] | None) -> bool:
    """Whether a request with ``Host: header`` may be served (``allowed`` ``None``: any).

    A missing or malformed header is refused whenever ``allowed`` is a list.
    """
    if allowed is None:
        return True
    name = split_host(header or "")
    return name is not None and name in {_name(h) for h in allowed}
