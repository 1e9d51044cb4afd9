"""The functions users bring: a plain function of a batch, or a model class set up once
per worker.

``hyperframes map INPUT MODULE:NAME`` and ``transcode --map MODULE:NAME`` take either:

* a **function** ``f(frames) -> answers``: ``frames`` is a ``(n, H, W, 3)`` uint8 RGB batch;
  it returns one answer per frame (a list or an array of length ``n``), or a dict of
  columns (each of length ``n``); for ``transcode --map``, ``n`` frames.
* a **class**, for models that load weights: it is instantiated once per worker (per
  thread, process or Ray actor) with no arguments, its ``setup()`` is called when it has
  one, and the instance is then called as the function above::

      class Detector:
          def setup(self):
              self.net = load_weights()          # once per worker
          def __call__(self, frames):
              return [self.net(f) for f in frames]

:class:`PerWorker` does the instantiating (it pickles as the class alone, so processes and
Ray workers each build their own) and :class:`Answers` checks what the function returns.

Example:
    >>> import numpy as np
    >>> class Mean:
    ...     def setup(self):
    ...         self.axes = (1, 2, 3)
    ...     def __call__(self, frames):
    ...         return {"mean": frames.mean(axis=self.axes).tolist(), "n": [1] * len(frames)}
    >>> Answers(PerWorker(Mean))(np.ones((2, 4, 4, 3), np.uint8))
    [{'mean': 1.0, 'n': 1}, {'mean': 1.0, 'n': 1}]
"""

from __future__ import annotations

import importlib
import sys
import threading
from collections.abc import Callable
from typing import Any

import numpy as np


def load(spec: str) -> Callable[..., Any]:
    """``MODULE:NAME`` imported (a module in the working folder included): a function, or
    a class wrapped in :class:`PerWorker`.

    Raises:
        ValueError: the spec is malformed, the module cannot be imported, or it has no
            callable of that name.
    """
    module_name, _, attr = spec.partition(":")
    if not module_name or not attr:
        raise ValueError(f"expected MODULE:NAME like mymodel:Detector, got {spec!r}")
    if "" not in sys.path and "." not in sys.path:
        sys.path.insert(0, "")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ValueError(f"cannot import module {module_name!r}: {exc}") from exc
    except SystemExit as exc:  # the module's own top level: not the end of the command
        raise ValueError(
            f"importing module {module_name!r} called sys.exit({exc.code!r}); keep what a "
            'script does at its top level under `if __name__ == "__main__":`'
        ) from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise ValueError(f"module {module_name!r} has no function or class {attr!r}")
    return PerWorker(fn) if isinstance(fn, type) else fn


class PerWorker:
    """Calls an instance of ``cls`` made once per thread (and so per process and actor),
    with ``setup()`` called first when the class has one."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.__name__ = getattr(cls, "__name__", "model")
        self.__module__ = getattr(cls, "__module__", __name__)
        self.__qualname__ = getattr(cls, "__qualname__", self.__name__)
        self._local = threading.local()

    def instance(self) -> Any:
        """This thread's instance, made (and set up) on first use."""
        made = getattr(self._local, "instance", None)
        if made is None:
            made = self.cls()
            setup = getattr(made, "setup", None)
            if callable(setup):
                setup()
            self._local.instance = made
        return made

    def __call__(self, frames: np.ndarray) -> Any:
        return self.instance()(frames)

    def __getstate__(self) -> dict[str, Any]:
        return {"cls": self.cls}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["cls"])  # type: ignore[misc]


class Answers:
    """``fn``'s answers for a batch as one value per frame: a dict of columns becomes one
    dict per frame; an array or list must have one entry per frame."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn
        self.__name__ = getattr(fn, "__name__", "function")
        self.__module__ = getattr(fn, "__module__", __name__)
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)

    def __call__(self, frames: np.ndarray) -> list[Any]:
        got = self.fn(frames)
        count = len(frames)
        if isinstance(got, dict):
            columns = {str(k): v for k, v in got.items()}
            wrong = {k: _length(v) for k, v in columns.items() if _length(v) != count}
            if wrong:
                raise ValueError(
                    f"{self.__name__} returned columns of lengths {wrong} for a batch of "
                    f"{count} frames; give each column one value per frame"
                )
            return [{k: v[j] for k, v in columns.items()} for j in range(count)]
        if _length(got) != count:
            raise ValueError(
                f"{self.__name__} returned {type(got).__name__} of length {_length(got)} for "
                f"a batch of {count} frames; return one answer per frame (a list or array "
                "of that length) or a dict of such columns"
            )
        return list(got)


def _length(value: Any) -> int | None:
    try:
        return len(value)
    except TypeError:
        return None
