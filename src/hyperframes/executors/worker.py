"""One object in a child process of its own, each call with a deadline: work that may hang
or crash (FFmpeg reading a damaged file, or one on a stalled mount) where it can be
stopped.

A thread stuck in a read or in a decoder's loop cannot be stopped; a process can. A
:class:`Worker` keeps ``target`` (a picklable callable) in one child and calls it there;
arrays that lie in any live shared block of this process (:class:`SharedBlocks`) travel as
where they lie, so the child writes frames straight into memory the parent reads. A call that
gives no answer within its ``timeout`` kills the child and raises
:class:`WorkerStalled`; a child that ends during a call raises :class:`WorkerDied`.
Either way the worker is then closed: make a new one to go on.

Example:
    >>> worker = Worker(len, name="hf-example")  # doctest: +SKIP
    >>> worker.call([1, 2, 3], timeout=5.0)  # doctest: +SKIP
    3
    >>> worker.close()  # doctest: +SKIP
"""

from __future__ import annotations

import multiprocessing
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any

from ..errors import StageError
from . import _child
from ._shm import SharedBlocks, SharedMemoryFull
from .processes import (
    call_child,
    end_all,
    pickled_function,
    start_child,
    unguarded_main_line,
    unguarded_message,
)

__all__ = [
    "SharedBlocks",
    "SharedMemoryFull",
    "Worker",
    "WorkerDied",
    "WorkerStalled",
    "ensure_orphan_exits",
]

ORPHAN_CHECK_S = 0.5
"""How often a long call checks that the process that started its worker is still there."""


class WorkerStalled(TimeoutError):
    """A call gave no answer within its deadline; the child was killed."""


class WorkerDied(ChildProcessError):
    """The child ended while a call ran (a crash in native code, out of memory, a kill)."""


class Worker:
    """``target`` kept in a child process, called there one call at a time.

    Args:
        target: a callable that pickles by reference (a module-level function, or an
            object of a module-level class), made once in the child.
        name: the child's process name (and the stage name in its errors).
        daemon: ``False`` lets the child start processes of its own (its work reads files
            in a reader process); it is ended as any worker is, on :meth:`close`, when the
            worker is collected, or as its pipe closes when this process dies.

    Raises:
        TypeError: ``target`` cannot be pickled.
        RuntimeError: made at the top level of the main script, which the child would run
            again (see :func:`~.processes.unguarded_main_line`).
    """

    def __init__(
        self, target: Callable[..., Any], *, name: str, daemon: bool = True,
        preload: tuple[str, ...] = (),
    ) -> None:  # fmt: skip
        _child.refuse_run_while_starting()
        if where := unguarded_main_line():
            raise RuntimeError(unguarded_message(where, f"a worker process ({name})"))
        payload = pickled_function(target, stage=name)
        method = (
            "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
        )
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([_child.__name__, *preload])
        self.name = name
        self._live = SharedBlocks()  # makes none: finds an array in any live block
        self._children = [start_child(context, name=name, stage=name, fn=target, daemon=daemon)]
        self._finalizer = weakref.finalize(self, end_all, self._children)
        self._children[0].load(payload)

    @property
    def pid(self) -> int | None:
        return self._children[0].process.pid if self._children else None

    def call(self, *args: Any, timeout: float | None = None) -> Any:
        """``target(*args)`` in the child; what it raises is raised here as itself.

        Raises:
            WorkerStalled: no answer within ``timeout`` seconds (the child was killed).
            WorkerDied: the child ended during the call.
            RuntimeError: the worker is closed.
        """
        if not self._children:
            raise RuntimeError(f"worker {self.name!r} is closed; make a new one")
        child = self._children[0]
        try:
            return call_child(child, self._live, args, {}, stage=self.name, timeout=timeout)
        except TimeoutError:
            child.process.kill()
            self.close()
            raise WorkerStalled(f"no answer in {timeout:g} s; its process was stopped") from None
        except StageError:
            if child.process.is_alive():
                raise  # the target raised what could not cross as itself
            how = child.ending()
            self.close()
            raise WorkerDied(f"its process {how} (a crash in native code, out of memory, "
                             "or a kill from outside)") from None  # fmt: skip

    def close(self) -> None:
        """End the child (killing it if busy)."""
        self._finalizer()


def ensure_orphan_exits() -> None:
    """Called in a worker's child, during a long call: end the child should its parent
    die meanwhile (the child learns of it from its pipe only between calls). Once per
    process: a thread that looks every :data:`ORPHAN_CHECK_S` seconds."""
    global _watching
    if _watching:
        return
    _watching, parent = True, os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            threading.Event().wait(ORPHAN_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="hf-orphan-watch", daemon=True).start()


_watching = False
