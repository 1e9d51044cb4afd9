"""One object in a child process of its own, each call with a deadline: work that may hang
or crash (FFmpeg reading a damaged file, or one on a stalled mount) where it can be
stopped.

A thread stuck in a read or in a decoder's loop cannot be stopped; a process can. A
:class:`Worker` keeps ``target`` (a picklable callable) in one child and calls it there;
arrays that lie in any live shared block of this process (:class:`SharedBlocks`) travel as
where they lie, so the child writes frames straight into memory the parent reads. A call that
gives no answer within its ``timeout`` kills the child and raises
:class:`WorkerStalled`; a child that ends during a call raises :class:`WorkerDied`.
Either way the worker is then closed: make a new one to go on. A child ends itself when the
process that made it dies, also in the middle of a call (it waits on that process).

Example:
    >>> worker = Worker(len, name="hf-example")  # doctest: +SKIP
    >>> worker.call([1, 2, 3], timeout=5.0)  # doctest: +SKIP
    3
    >>> worker.close()  # doctest: +SKIP
"""

from __future__ import annotations

import multiprocessing
import os
import select
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

__all__ = ["SharedBlocks", "SharedMemoryFull", "Worker", "WorkerDied", "WorkerStalled"]

ORPHAN_CHECK_S = 0.5
"""How often a long call checks that the process that made its worker is still there,
where it cannot wait on it (:func:`ensure_orphan_exits`)."""


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
            in a reader process); it is ended as any worker is: on :meth:`close`, when the
            worker is collected, or when this process dies.
        preload: modules the fork server imports once, where it has not started yet
            (the first worker or process executor of this process starts it), so that
            each child starts with them imported: ``target``'s own module, say.

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
        payload = pickled_function(_Watched(target, os.getpid()), stage=name)
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


class _Watched:
    """``target`` as the child calls it: the first call starts the watch that ends the child
    should the process that made the worker die (a call may last long: a whole segment,
    or a read stuck on a stalled file)."""

    def __init__(self, target: Callable[..., Any], owner: int) -> None:
        self.target, self.owner = target, owner

    def __call__(self, *args: Any) -> Any:
        ensure_orphan_exits(self.owner)
        return self.target(*args)


def ensure_orphan_exits(parent: int) -> None:
    """Called in a worker's child with the pid of the process that made the worker: end
    the child should that process die. The child learns of it from its pipe only between
    calls, and its parent is multiprocessing's fork server, which outlives its clients
    while any child of it lives. Once per process: a thread that waits on the process (a
    pidfd), or looks every :data:`ORPHAN_CHECK_S` seconds."""
    global _watching
    if _watching:
        return
    _watching = True
    try:
        handle: int | None = os.pidfd_open(parent)
    except (AttributeError, OSError):  # (an older kernel, or one that refuses it)
        handle = None

    def gone() -> bool:
        try:
            with open(f"/proc/{parent}/stat", "rb") as stat:
                return stat.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X")
        except OSError:
            return True

    def watch() -> None:
        if handle is not None:
            select.select([handle], [], [])
        else:
            while not gone():
                threading.Event().wait(ORPHAN_CHECK_S)
        os._exit(1)

    threading.Thread(target=watch, name="hf-orphan-watch", daemon=True).start()


_watching = False
