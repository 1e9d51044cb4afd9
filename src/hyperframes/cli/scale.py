"""Where a command's work runs: ``--executor``, ``--ray-address`` and ``--chunks``.

``--executor`` picks how stage functions run (threads, processes over shared memory, or
Ray actors); ``--chunks`` (``transcode`` and ``render``) cuts the job into segments that
run as Ray tasks over a cluster and are joined by stream copy. Both reach a cluster
through ``--ray-address``: by default a local Ray is started (or the cluster named by
``RAY_ADDRESS`` is joined), ``auto`` joins the one running on this machine.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .common import positive_int

if TYPE_CHECKING:
    from ..executors import Executor

EXECUTORS = ("threads", "processes", "ray")
QUIET = {"logging_level": logging.WARNING}
"""``ray.init`` options of the commands: Ray's INFO lines stay off the terminal."""


def add_executor_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--executor`` and ``--ray-address``."""
    group = parser.add_argument_group("where the work runs")
    group.add_argument(
        "--executor", choices=EXECUTORS, default=None,
        help="how stage functions run: threads (default), processes (pools in shared "
        "memory) or ray (stages as Ray actors; needs the [ray] extra)",
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


def executor_for(args: argparse.Namespace) -> str | Executor:
    """The executor the options ask for (starting or joining Ray for ``--executor ray``).

    Raises:
        ValueError: ``--ray-address`` without a use for it.
        ImportError: ``--executor ray`` without Ray installed (says how to install it).
        ConnectionError: the cluster at ``--ray-address`` cannot be reached.
    """
    from ..executors import get_executor

    name = getattr(args, "executor", None) or "threads"
    address = getattr(args, "ray_address", None)
    if address is not None and name != "ray":
        raise ValueError("--ray-address names a Ray cluster; add --executor ray to use it")
    if name == "ray":
        return get_executor("ray", address=address, **QUIET)
    return name


def ray_for_chunks(args: argparse.Namespace) -> Executor:
    """The Ray connection ``--chunks`` runs its segments on.

    Raises:
        ValueError: ``--chunks`` with an executor other than Ray.
    """
    from ..executors import get_executor

    if getattr(args, "executor", None) not in (None, "ray"):
        raise ValueError(
            f"--chunks runs segments as Ray tasks; drop --executor {args.executor} "
            "(or pass --executor ray)"
        )
    return get_executor("ray", address=getattr(args, "ray_address", None), **QUIET)


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
