"""Where a command's work runs: ``--executor``, ``--ray-address`` and ``--chunks``.

``--executor`` picks how stage functions run (threads, processes over shared memory, or
Ray actors); ``--chunks`` (``transcode`` and ``render``) cuts the job into segments that
run as Ray tasks over a cluster and are joined by stream copy. Both reach a cluster
through ``--ray-address``: by default a local Ray is started (or the cluster named by
``RAY_ADDRESS`` is joined), ``auto`` joins the one running on this machine. Ray's own
INFO lines and its notice that a local Ray turned token authentication on stay off the
terminal (:func:`ray_executor`); its warnings and errors show.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import UsageError, positive_int
from .options import Scale

if TYPE_CHECKING:
    import logging

    from ..executors import Executor
    from ..executors.ray import RayExecutor

EXECUTORS = ("threads", "processes", "ray")
QUIET = {"logging_level": "warning"}
"""``ray.init`` options of the commands: Ray's INFO lines stay off the terminal."""
TOKEN_NOTICE = "Token authentication is enabled for this Ray cluster"
"""The start of the warning Ray logs (to :data:`TOKEN_LOGGER`) when a local Ray turns
token authentication on, its secure default (``RAY_AUTH_MODE=disabled`` opts out): news
to no one running a command. The warning that authentication is *off* still shows."""
TOKEN_LOGGER = "ray._private.authentication.authentication_token_setup"


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--executor`` and ``--ray-address``."""
    group = parser.add_argument_group("where the work runs")
    group.add_argument(
        "--executor", choices=EXECUTORS, default=None,
        help="how stage functions run: threads (default), processes (pools in shared "
        "memory) or ray (stages as Ray actors; needs the [ray] extra); over many inputs, "
        "processes read them side by side, --workers (else one a core) at once",
    )  # fmt: skip
    group.add_argument(
        "--ray-address", default=None, metavar="ADDRESS",
        help="the Ray cluster for --executor ray and --chunks: HOST:PORT, ray://HOST:PORT, "
        "or auto (the one running here); default: start a local Ray (or join RAY_ADDRESS)",
    )  # fmt: skip


def add_chunk_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--chunks [N]``."""
    parser.add_argument(
        "--chunks", type=positive_int, nargs="?", const=0, default=None, metavar="N",
        help="run in N segments as Ray tasks over the cluster, joined by stream copy (no "
        "N: about two per CPU of the cluster); a rerun resumes, redoing only missing "
        "segments",
    )  # fmt: skip


def executor_for(scale: Scale) -> str | Executor:
    """The executor the options ask for (starting or joining Ray for ``--executor ray``).

    Raises:
        UsageError: ``--ray-address`` without a use for it.
        ImportError: ``--executor ray`` without Ray installed (says how to install it).
        ConnectionError: the cluster at ``--ray-address`` cannot be reached.
    """
    name = scale.executor or "threads"
    if scale.ray_address is not None and name != "ray":
        raise UsageError("--ray-address names a Ray cluster; add --executor ray to use it")
    if name == "ray":
        return ray_executor(scale.ray_address)
    return name


def ray_for_chunks(scale: Scale) -> RayExecutor:
    """The Ray connection ``--chunks`` runs its segments on.

    Raises:
        UsageError: ``--chunks`` with an executor other than Ray, or with ``--workers``
            (a segment's task uses the CPU it reserves: ``cpus_per_segment``).
    """
    if scale.executor not in (None, "ray"):
        raise UsageError(
            f"--chunks runs segments as Ray tasks; drop --executor {scale.executor} "
            "(or pass --executor ray)"
        )
    if scale.workers is not None:
        raise UsageError(
            "--chunks runs each segment as a Ray task on one CPU of the cluster, so "
            "--workers does not apply; drop --workers"
        )
    return ray_executor(scale.ray_address)


def ray_executor(address: str | None) -> RayExecutor:
    """Start or join Ray at ``address`` with :data:`QUIET` and without :data:`TOKEN_NOTICE`.

    Ray's other warnings, C++ lines included, still reach stderr: the one an offline
    machine shows (``Failed to determine local IP via external connectivity``) is written
    by Ray's C++ core before any of its log settings apply.
    """
    import logging

    from ..executors import get_executor
    from ..executors.ray import RayExecutor

    notices = logging.getLogger(TOKEN_LOGGER)
    if _not_token_notice not in notices.filters:
        notices.addFilter(_not_token_notice)
    executor = get_executor("ray", address=address, **QUIET)
    assert isinstance(executor, RayExecutor)
    return executor


def _not_token_notice(record: logging.LogRecord) -> bool:
    return not record.getMessage().startswith(TOKEN_NOTICE)


def ship_module_of(fn: Any, executor: Any) -> None:
    """Let Ray workers load ``fn`` when its module lies outside the installed packages (a
    module in the working folder, which workers started elsewhere cannot import)."""
    ray = getattr(executor, "ray", None)
    module = sys.modules.get(getattr(fn, "__module__", ""))
    path = getattr(module, "__file__", None)
    if ray is None or module is None or path is None:
        return
    installed = any(
        Path(path).resolve().is_relative_to(Path(p).resolve())
        for p in sys.path
        if p and ("site-packages" in p or "dist-packages" in p)
    )
    if not installed:
        from ..executors.ray import ship_by_value

        ship_by_value(ray, module)
