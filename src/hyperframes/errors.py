"""Errors raised by hyperframes.

Bad arguments raise built-in errors (``ValueError``, ``TypeError``). Domain
failures raise a :class:`HyperframesError` subclass that also inherits the
matching built-in, so ``except ValueError`` keeps working::

    HyperframesError
    ├── FrameError(ValueError)        a frame of the wrong shape, dtype or value
    ├── StageError(RuntimeError)      a stage broke the stage contract
    ├── FramesFailed(RuntimeError)    more frames failed than allow_failures= permits
    ├── PoolExhausted(TimeoutError)   no pool slot came free in time; says who holds them
    ├── Cancelled(RuntimeError)       internal: wakes waiters when a run stops
    ├── UserExit(RuntimeError)        user code called sys.exit() or raised KeyboardInterrupt
    ├── MediaError(ValueError)        a file that cannot be read or written as media
    │   └── CorruptFrame              a frame that cannot be decoded (with its index)
    └── StoreError(ValueError)        a hyperframe store that cannot be used
        └── StoreCorrupt              the store's bytes do not check out

An exception raised by user code inside a stage is re-raised as itself (same
type, same traceback) with a note naming the stage, batch and frame ids.
"""

from __future__ import annotations


class HyperframesError(Exception):
    """Base class of every error hyperframes raises on purpose."""


class FrameError(HyperframesError, ValueError):
    """A frame has the wrong shape, dtype or values."""


class StageError(HyperframesError, RuntimeError):
    """A stage returned something that breaks the stage contract."""


class FramesFailed(HyperframesError, RuntimeError):
    """More frames failed (after retries and per-frame fallback) than the run allows.

    Attributes:
        failures: ``(stage, frame id, exception)`` for each failed frame so far.
    """

    def __init__(self, message: str, failures: list[tuple[str, int, BaseException]]) -> None:
        super().__init__(message)
        self.failures = failures


class PoolExhausted(HyperframesError, TimeoutError):
    """No pool slot came free within the timeout."""


class Cancelled(HyperframesError, RuntimeError):
    """The pipeline was stopped while this call waited (internal signal)."""


class UserExit(HyperframesError, RuntimeError):
    """User code inside a run raised ``SystemExit`` (``sys.exit()``) or, off the main
    thread, ``KeyboardInterrupt``: an error of the run, not the end of the program."""


def as_run_error(exc: BaseException, *, main_thread: bool) -> BaseException:
    """``exc`` as the run's error: a ``SystemExit`` from user code, a
    ``KeyboardInterrupt`` raised where no signal can raise one (off the main thread), or
    another ``BaseException`` that is not an ``Exception``, as a :class:`UserExit` that
    keeps its notes; anything else as it is."""
    if isinstance(exc, SystemExit):
        what = f"called sys.exit({exc.code!r})"
    elif isinstance(exc, KeyboardInterrupt):
        if main_thread:  # Ctrl-C, or a signal raised as it: the user stops the run
            return exc
        what = "raised KeyboardInterrupt"
    elif not isinstance(exc, Exception | GeneratorExit):
        what = f"raised {type(exc).__name__}, a BaseException that is not an Exception"
    else:
        return exc
    error = UserExit(f"the function {what} inside the run; raise an exception to fail a frame")
    for note in getattr(exc, "__notes__", []):
        error.add_note(note)
    error.__cause__ = exc
    return error


class MediaError(HyperframesError, ValueError):
    """A media file cannot be read or written."""


class CorruptFrame(MediaError):
    """A frame inside a media file cannot be decoded."""

    def __init__(self, message: str, *, frame: int | None = None) -> None:
        super().__init__(message)
        self.frame = frame


class StoreError(HyperframesError, ValueError):
    """A hyperframe store cannot be opened or used."""


class StoreCorrupt(StoreError):
    """A hyperframe store's bytes fail validation."""
