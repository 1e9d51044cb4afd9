"""Reaching Ray: importing it, joining or starting a cluster, and what workers can be sent.

Every error says what to do: how to install Ray, which address did not answer, what
about a function keeps it from being pickled.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import sys
from typing import Any

INSTALL = "pip install 'hyperframes-engine[ray]'"
_joined: list[str] = []
"""The address of the running cluster this process joined (a driver of it), if any."""


def import_ray() -> Any:
    """The ``ray`` module, or an ImportError that says how to install it."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(
            f"the Ray executor needs Ray ({exc}); install it with: {INSTALL}"
        ) from exc
    return ray


def check_reachable(address: str | None, *, timeout_s: float = 5.0) -> None:
    """Fail in seconds when ``address`` (or ``RAY_ADDRESS``) names a ``host:port`` where
    nothing answers: ``ray.init`` itself keeps retrying for minutes.

    Raises:
        ValueError: an address that is not ``HOST:PORT``, ``ray://HOST:PORT`` or ``auto``.
        ConnectionError: nothing accepts connections there.
    """
    address = address if address is not None else os.environ.get("RAY_ADDRESS")
    if not address or address in ("auto", "local"):
        return
    host, sep, port = address.split("://", 1)[-1].rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"a Ray address is HOST:PORT, ray://HOST:PORT or 'auto', got {address!r}")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s).close()
    except OSError as exc:
        raise ConnectionError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}); check the "
            f"address, or start a cluster there with: ray start --head --port {port}"
        ) from None


def start_ray(ray: Any, address: str | None, **init_kwargs: Any) -> None:
    """``ray.init`` unless Ray is already initialised here, with errors that say what to do.

    ``address=None`` joins the cluster of ``RAY_ADDRESS`` or starts a local Ray, never the
    cluster last started on this machine (which ``ray.init()`` would join, through
    ``/tmp/ray/ray_current_cluster``): pass ``"auto"`` for that one.
    """
    if ray.is_initialized():
        return
    if address is None and not os.environ.get("RAY_ADDRESS"):
        address = "local"
    check_reachable(address)
    try:
        ray.init(address=address, **init_kwargs)
        if address != "local":
            _joined.append(str(address))
    except ConnectionError as exc:
        if address == "auto":
            raise ConnectionError(
                "no running Ray cluster found for address 'auto' (start one with: ray start "
                "--head), or leave the address out to start a local Ray"
            ) from exc
        raise


def check_shippable(ray: Any, value: Any, what: str) -> None:
    """Raise a TypeError that says what to do when ``value`` cannot be sent to Ray workers."""
    try:
        ray.cloudpickle.dumps(value)
    except Exception as exc:
        raise TypeError(
            f"{what} cannot be sent to Ray workers ({exc}); define it at the top level of a "
            "module and keep objects that cannot be pickled (locks, open files, clients) out "
            "of what it refers to"
        ) from exc


def ship_by_value(ray: Any, module: Any) -> None:
    """Send ``module``'s functions to workers by value (a script or a module workers cannot
    import, such as one in the driver's working folder)."""
    ray.cloudpickle.register_pickle_by_value(module)


def node_id() -> str:
    """The id of the Ray node this code runs on (in a task or an actor)."""
    return str(import_ray().get_runtime_context().get_node_id())


def leave_quickly(code: int) -> None:
    """End this process with ``code`` now when it is a driver of a running cluster it
    joined: the other exit handlers run and the output is flushed, but not Ray's
    disconnect, which waits 0.3 s for its listener threads, nor the interpreter's teardown
    (another 0.1 s with Ray loaded). The cluster ends the job when its driver's process
    ends either way. A Ray this process started itself is shut down as usual (that stops
    its processes). Returns when there is nothing to leave.
    """
    ray = sys.modules.get("ray")
    if not _joined or ray is None or not ray.is_initialized():
        return
    atexit.unregister(ray.shutdown)
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # closed, or a pipe gone
            stream.flush()
    os._exit(code)
