"""How stage functions run: threads (default), processes over shared memory, or Ray.

An executor does three things for one run (see :class:`Executor`): it allocates the
memory of the frame pools, it turns a user function into one that runs where the
executor runs things, and it cleans up. Executors other than threads are imported only
when asked for, so their dependencies stay optional.

Example:
    >>> executor = get_executor("threads")
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ..frames import committed_memory


@runtime_checkable
class Executor(Protocol):
    """The contract between the engine and a way of running stage functions.

    The engine calls :meth:`allocate` for every pool of a run, :meth:`remote` once per
    stage function when the run starts, and :meth:`close` once when it ends (also after
    failures). The callable :meth:`remote` returns is called from the stage's worker
    threads, at most ``workers`` at a time, with the same arguments as ``fn``; arrays
    among them may be views into pool blocks from :meth:`allocate`, which an executor may
    recognise to avoid copies. It returns what ``fn`` returns; if ``fn`` returned (a view
    of) one of its array arguments, the returned array must share that argument's memory
    so in-place stages stay in place.
    """

    name: str

    def allocate(self, nbytes: int) -> Any:
        """A writable buffer of ``nbytes`` for a pool block."""
        ...

    def remote(self, fn: Callable[..., Any], *, stage: str, workers: int) -> Callable[..., Any]:
        """``fn`` as it runs under this executor."""
        ...

    def close(self) -> None:
        """Release everything (processes, shared memory, connections)."""
        ...

    def summary(self) -> dict[str, Any]:
        """What the run's report says of where batches went (``{}``: nothing to say)."""
        ...


class ThreadExecutor:
    """Stage functions run in the engine's own worker threads (the default)."""

    name = "threads"

    def allocate(self, nbytes: int) -> Any:
        return committed_memory(nbytes)

    def remote(self, fn: Callable[..., Any], *, stage: str, workers: int) -> Callable[..., Any]:
        return fn

    def close(self) -> None:
        return None

    def summary(self) -> dict[str, Any]:
        return {}


_REGISTRY: dict[str, tuple[str, str, str]] = {
    # name: (module, class, how to install what it needs)
    "processes": ("hyperframes.executors.processes", "ProcessExecutor", ""),
    "ray": ("hyperframes.executors.ray", "RayExecutor", "pip install 'hyperframes-engine[ray]'"),
}


def get_executor(executor: str | Executor | None, **options: Any) -> Executor:
    """The executor named ``executor`` ("threads", "processes", "ray"), or ``executor`` itself."""
    if executor is None or executor == "threads":
        return ThreadExecutor()
    if not isinstance(executor, str):
        if isinstance(executor, Executor):
            return executor
        raise TypeError(f"executor must be a name or an Executor, got {type(executor).__name__}")
    if executor not in _REGISTRY:
        names = ", ".join(["threads", *_REGISTRY])
        raise ValueError(f"executor must be one of {names}; got {executor!r}")
    module_name, class_name, install = _REGISTRY[executor]
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = f"; install it with: {install}" if install else ""
        raise ImportError(f"the {executor!r} executor is not available ({exc}){hint}") from exc
    made: Executor = getattr(module, class_name)(**options)
    return made
