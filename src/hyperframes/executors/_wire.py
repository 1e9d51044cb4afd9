"""What travels between the process executor and its children, both ways.

Arguments and results are *encoded*: an array inside a shared block becomes a
:class:`~hyperframes.executors._shm.ShmView` (a few numbers), anything else is pickled
as it is. An exception is sent as itself when it survives a pickle round trip, else as
its type name and message; the child's formatted traceback always comes along.
"""

from __future__ import annotations

import pickle
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import StageError
from ._shm import ShmView

Locate = Callable[[Any], ShmView | None]
View = Callable[[ShmView], Any]


@dataclass(frozen=True)
class Shared:
    """An argument or result that lies in a shared block."""

    where: ShmView


@dataclass(frozen=True)
class Failure:
    """An exception raised in a child: itself when picklable, else described."""

    error: BaseException | None
    type_name: str
    message: str
    traceback: str

    @classmethod
    def of(cls, exc: BaseException) -> Failure:
        text = "".join(traceback.format_exception(exc))
        error: BaseException | None = exc
        try:  # can the exception cross back to the parent as itself?
            pickle.loads(pickle.dumps(exc))
        except Exception:
            error = None
        try:
            message = str(exc)
        except Exception:
            message = f"{type(exc).__qualname__} (its message could not be shown)"
        return cls(error, type(exc).__qualname__, message, text)


@dataclass(frozen=True)
class Returned:
    """A child's answer to a call: the encoded result, and arrays written back in place."""

    value: Any
    written: dict[int, Any]


def encode(value: Any, locate: Locate) -> Any:
    where = locate(value)
    return value if where is None else Shared(where)


def decode(value: Any, view: View) -> Any:
    return view(value.where) if isinstance(value, Shared) else value


def encode_all(args: tuple[Any, ...], kwargs: dict[str, Any], locate: Locate) -> tuple[Any, ...]:
    return (
        tuple(encode(a, locate) for a in args),
        {k: encode(v, locate) for k, v in kwargs.items()},
    )


def reraised(failure: Failure, *, stage: str, where: str) -> BaseException:
    """The exception to raise in the parent for ``failure`` (with the remote traceback)."""
    error = failure.error
    if error is None:
        error = StageError(
            f"stage {stage!r} raised {failure.type_name}: {failure.message} in {where} "
            "(the exception could not be sent back as itself)"
        )
    error.add_note(f"traceback in {where}:\n{failure.traceback.rstrip()}")
    return error
