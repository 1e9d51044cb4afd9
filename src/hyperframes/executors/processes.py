"""Stage functions in worker processes, frames in shared memory: ``executor="processes"``.

Every pool of a run is a ``multiprocessing.shared_memory`` block. A stage gets
``workers`` child processes for the whole run; each call of the stage function goes to
an idle child. Array arguments that lie in a pool travel as a few numbers (block,
offset, shape, strides, dtype) and the child works on the very same memory, so an
in-place stage stays in place with no copy; other arguments and results are pickled.

Example:
    >>> from hyperframes import Pipeline  # doctest: +SKIP
    >>> line = Pipeline.from_frames(frames).map(slow_python_fn, workers=2)  # doctest: +SKIP
    >>> line.run(executor="processes")  # doctest: +SKIP

A child imports the parent's main script again before it runs anything, so a script
must start its run under ``if __name__ == "__main__":``; a run started at a script's
top level raises ``RuntimeError`` saying so (:func:`unguarded_main_line`) instead of
starting children that would each start the run again.

Note:
    Starting a child costs about 20-60 ms with ``forkserver`` after the first (the
    server itself starts once per Python process, ~0.2 s) and 0.2-0.4 s each with
    ``spawn``; children live for one run. Worth it when a stage is pure Python (it
    holds the GIL); for numpy, OpenCV or PyAV work, threads are cheaper.

Longer than 300 lines: starting the children, the pipe protocol and the shutdown are one
lifecycle whose failure paths refer to each other.
"""

from __future__ import annotations

import ast
import multiprocessing
import pickle
import queue
import sys
import threading
import time
import weakref
from collections.abc import Callable
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, Literal

import numpy as np

from ..errors import StageError
from . import _child
from ._shm import SharedBlocks
from ._wire import Failure, Returned, Shared, encode_all, reraised

StartMethod = Literal["forkserver", "spawn"]

STOP_GRACE_S = 1.0
"""How long a child may take to exit after its connection closed before it is terminated."""


def function_name(fn: Any) -> str:
    """A readable name of a stage function (looking inside engine wrappers like RenderInto)."""
    inner = getattr(fn, "fn", None)
    target = inner if callable(inner) else fn
    module = getattr(target, "__module__", None) or "?"
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}.{name}"


def pickled_function(fn: Callable[..., Any], *, stage: str) -> bytes:
    """``fn`` pickled by reference, or a TypeError that says how to make it so."""
    try:
        return pickle.dumps(fn)
    except Exception as exc:
        raise TypeError(
            f"stage {stage!r}: the function {function_name(fn)} cannot be sent to worker "
            f"processes ({exc}); define it at module level in an importable module (not a "
            "lambda, a nested function or a bound method of an unpicklable object), or run "
            "with executor='threads'"
        ) from exc


def unguarded_main_line(*, within: CodeType | None = None) -> str | None:
    """``"path:line"`` of the top-level statement of the main script that is running now,
    if children would run it again: it is not under an ``if`` (``if __name__ ==
    "__main__":`` or any other), and the main module is one that ``spawn`` and
    ``forkserver`` children import again (a script or ``python -m package.module``, not a
    package's ``__main__.py``, ``-c`` or an interactive session). ``None`` otherwise, and
    whenever it cannot tell (the source cannot be read).

    Args:
        within: only look through the frames called from a frame of this code (the
            ``Pipeline.run`` that is starting); ``None`` looks through all of them.
    """
    main = sys.modules.get("__main__")
    spec_name = getattr(getattr(main, "__spec__", None), "name", None)
    path = getattr(main, "__file__", None)
    if main is None or path is None or spec_name == "__main__":
        return None
    if spec_name is not None and spec_name.endswith(".__main__"):
        return None  # multiprocessing does not import a package's __main__ again
    if spec_name is None and Path(path).stem == "ipython":
        return None  # nor the ipython launcher
    frame: FrameType | None = sys._getframe(1)
    seen_within = within is None
    while frame is not None:
        if frame.f_code is within:
            seen_within = True
        elif frame.f_code.co_name == "<module>" and frame.f_globals is vars(main):
            break
        frame = frame.f_back
    if frame is None or not seen_within:
        return None
    line = frame.f_lineno
    try:
        tree = ast.parse(Path(frame.f_code.co_filename).read_bytes())
    except (OSError, SyntaxError, ValueError):
        return None
    return None if _under_an_if(tree.body, line) else f"{frame.f_code.co_filename}:{line}"


def _under_an_if(body: list[ast.stmt], line: int) -> bool:
    """Whether ``line`` lies in an ``if`` or ``match`` among ``body`` (or nested deeper)."""
    for node in body:
        if not node.lineno <= line <= (node.end_lineno or node.lineno):
            continue
        if isinstance(node, ast.If | ast.Match):
            return True
        inner: list[ast.stmt] = []
        for name in ("body", "orelse", "finalbody", "handlers"):
            for child in getattr(node, name, []):
                if isinstance(child, ast.ExceptHandler):
                    inner.extend(child.body)
                elif isinstance(child, ast.stmt):
                    inner.append(child)
        return _under_an_if(inner, line)
    return False


def _starting_run() -> CodeType | None:
    """The code of ``Pipeline.run``, if the engine is loaded (it is when a run makes us)."""
    module = sys.modules.get("hyperframes.pipeline")
    return None if module is None else module.Pipeline.run.__code__


def unguarded_message(where: str, what: str = "a run with executor='processes'") -> str:
    """The one line that says a run started at a script's top level, and what to do."""
    return (
        f"{what} started at the top level of the main script "
        f"({where}); every worker process imports that script again and would start the run "
        f"again, so nothing can run; {_child.GUARD_ADVICE}"
    )


class _Child:
    """One worker process and the parent's end of its connection."""

    def __init__(self, process: BaseProcess, conn: Connection, *, stage: str, fn: str) -> None:
        self.process, self.conn, self.stage, self.fn = process, conn, stage, fn
        self.ready = False

    def load(self, payload: bytes) -> None:
        """Send the pickled stage function (its answer is read by the first call)."""
        try:
            self.conn.send(("fn", payload))
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._died()

    def call(self, message: tuple[Any, ...], timeout: float | None = None) -> tuple[str, Any]:
        """Send ``message`` and wait for the answer (raises :class:`TimeoutError` after
        ``timeout`` seconds without one; the child is then still running it)."""
        if not self.ready:
            kind, payload = self._receive()
            if kind == "failed":
                assert isinstance(payload, Failure)
                raise TypeError(
                    f"stage {self.stage!r}: the function {self.fn} could not be loaded in a "
                    f"worker process ({payload.type_name}: {payload.message}); define it at "
                    "module level in a module the worker can import"
                )
            self.ready = True
        try:
            self.conn.send(message)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            self._died()
        return self._receive(timeout)

    def _receive(self, timeout: float | None = None) -> tuple[str, Any]:
        if not wait([self.conn, self.process.sentinel], timeout):
            raise TimeoutError(f"no answer from worker process {self.process.pid} in {timeout} s")
        try:
            answer: tuple[str, Any] = self.conn.recv()
        except (EOFError, ConnectionResetError, OSError):
            self._died()
        return answer

    def ending(self) -> str:
        """How the child ended: "exited with code 1", "was killed by signal 9 (...)"."""
        self.process.join(STOP_GRACE_S)
        code = self.process.exitcode
        if code is None:
            return "is gone"
        if code < 0:
            return f"was killed by signal {-code} (exit code {code})"
        return f"exited with code {code}"

    def _died(self) -> Any:
        how = self.ending()
        if self.process.exitcode == _child.STARTING_EXIT:
            main = getattr(sys.modules.get("__main__"), "__file__", None) or "the main module"
            raise StageError(
                f"stage {self.stage!r}: its worker process {self.process.pid} stopped while "
                f"starting, because importing {main} in it started the run again; "
                f"{_child.GUARD_ADVICE}"
            ) from None
        raise StageError(
            f"stage {self.stage!r}: its worker process {self.process.pid} {how} while "
            f"running {self.fn}; the run stopped (out of memory, a crash in native code, or "
            "killed from outside)"
        ) from None

    def stop(self) -> None:
        """Close the connection: an idle child sees it end and exits by itself."""
        self.conn.close()


def start_child(context: Any, *, name: str, stage: str, fn: Any, daemon: bool = True) -> _Child:
    """A new child process running the worker loop (:func:`_child.serve`) for ``fn``
    (``daemon=False``: one that may start children of its own)."""
    parent_end, child_end = context.Pipe()
    process = context.Process(target=_child.serve, args=(child_end,), name=name, daemon=daemon)
    process.start()
    child_end.close()
    return _Child(process, parent_end, stage=stage, fn=function_name(fn))


def end_all(children: list[_Child]) -> None:
    """Close every child's connection, then wait, terminate and kill as needed."""
    doomed, children[:] = list(children), []
    for child in doomed:
        child.stop()
    deadline = time.monotonic() + STOP_GRACE_S
    for child in doomed:
        child.process.join(max(0.0, deadline - time.monotonic()))
    for signal_it in ("terminate", "kill"):
        alive = [c.process for c in doomed if c.process.is_alive()]
        for process in alive:
            getattr(process, signal_it)()
        for process in alive:
            process.join(STOP_GRACE_S)
    for child in doomed:
        if not child.process.is_alive():
            child.process.close()


class _Remote:
    """``fn`` as called from the engine's threads: each call goes to an idle child."""

    def __init__(self, executor: ProcessExecutor, children: list[_Child], *, stage: str) -> None:
        self._executor, self._stage = executor, stage
        self._idle: queue.SimpleQueue[_Child] = queue.SimpleQueue()
        for child in children:
            self._idle.put(child)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        child = self._idle.get()
        try:
            return call_child(child, self._executor.blocks, args, kwargs, stage=self._stage)
        finally:
            self._idle.put(child)


def call_child(
    child: _Child,
    blocks: SharedBlocks,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    stage: str,
    timeout: float | None = None,
) -> Any:
    """``fn(*args, **kwargs)`` run by ``child``: arrays in ``blocks`` travel as where they
    lie, what it wrote into the others is copied back, and what it raised is raised here.

    Raises:
        TimeoutError: no answer within ``timeout`` seconds (the child is still busy).
        StageError: the child ended while it ran the call.
    """
    encoded_args, encoded_kwargs = encode_all(args, kwargs, blocks.locate)
    kind, payload = child.call(("call", encoded_args, encoded_kwargs), timeout)
    if kind == "raised":
        raise reraised(payload, stage=stage, where=f"worker process {child.process.pid}")
    assert isinstance(payload, Returned)
    for i, array in payload.written.items():
        np.copyto(args[i], array)
    if isinstance(payload.value, Shared):
        return blocks.view(payload.value.where)
    return payload.value


class ProcessExecutor:
    """Runs stage functions in child processes over shared-memory pools.

    Args:
        start_method: how children start: ``"forkserver"`` (default where available:
            fast after the first run) or ``"spawn"``. ``fork`` is not offered: the
            engine's threads exist when children start.

    Raises:
        ValueError: an unknown start method.
        RuntimeError: made by a run that started at the top level of the main script, not
            under ``if __name__ == "__main__":`` (see :func:`unguarded_main_line`).
    """

    name = "processes"

    def __init__(self, *, start_method: StartMethod | None = None) -> None:
        # checked here, not only in remote(): the fewer frames, the shorter the traceback
        starting = _starting_run()
        if starting is not None and (where := unguarded_main_line(within=starting)):
            raise RuntimeError(unguarded_message(where))
        available = multiprocessing.get_all_start_methods()
        if start_method is None:
            start_method = "forkserver" if "forkserver" in available else "spawn"
        if start_method not in ("forkserver", "spawn") or start_method not in available:
            allowed = [m for m in ("forkserver", "spawn") if m in available]
            raise ValueError(f"start_method must be one of {allowed}, got {start_method!r}")
        self.start_method: StartMethod = start_method
        self._context = multiprocessing.get_context(start_method)
        self.blocks = SharedBlocks()
        self._children: list[_Child] = []
        self._pids: list[int] = []
        self._lock = threading.Lock()
        self._closed = False
        self._finalizer = weakref.finalize(self, end_all, self._children)

    def allocate(self, nbytes: int) -> Any:
        """A shared block of ``nbytes`` for a pool (unlinked again by :meth:`close`)."""
        if self._closed:
            raise RuntimeError("this ProcessExecutor is closed; make a new one for a new run")
        return self.blocks.create(nbytes)

    def summary(self) -> dict[str, Any]:
        """(Nothing for the report: every batch runs in this machine's children.)"""
        return {}

    def remote(self, fn: Callable[..., Any], *, stage: str, workers: int) -> Callable[..., Any]:
        """Start ``workers`` children running ``fn``; return the callable that feeds them.

        Raises:
            TypeError: ``fn`` cannot be pickled by reference (a lambda, a nested function).
            RuntimeError: the run started at the top level of the main script.
        """
        _child.refuse_run_while_starting()  # in a child importing the script: exit quietly
        if where := unguarded_main_line():
            raise RuntimeError(unguarded_message(where))
        payload = pickled_function(fn, stage=stage)
        if self.start_method == "forkserver":
            self._context.set_forkserver_preload([_child.__name__])
        children = []
        for k in range(workers):
            with self._lock:
                if self._closed:
                    raise RuntimeError("this ProcessExecutor is closed")
                child = start_child(self._context, name=f"hf-{stage}-{k}", stage=stage, fn=fn)
                self._children.append(child)
                self._pids.append(int(child.process.pid or 0))
            children.append(child)
        for child in children:  # after every start, so children boot in parallel
            child.load(payload)
        return _Remote(self, children, stage=stage)

    def pids(self) -> list[int]:
        """Process ids of the children started so far (for tests and monitoring)."""
        return list(self._pids)

    def close(self) -> None:
        """End every child (terminating busy ones) and unlink every shared block."""
        with self._lock:
            self._closed = True
        try:
            end_all(self._children)
        finally:
            self.blocks.unlink_all()

    def __repr__(self) -> str:
        return f"ProcessExecutor(start_method={self.start_method!r})"
