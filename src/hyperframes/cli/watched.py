"""Each input's job in a worker process, stopped where it stalls: ``transcode``, ``pack``,
``analyze`` and ``info`` over many inputs with ``--file-timeout S``.

The jobs run one after the other in one worker process. One that does nothing for ``S``
seconds (no CPU, no byte read or written: a read stuck on a stalled mount, a FIFO with no
writer) is stopped, as is one whose process dies (a crash in a decoder); its input is
listed with why, the temporary file it was writing beside its output is removed, and the
next input goes on in a fresh process. ``map`` watches its reads more closely
(:mod:`..io.beating`, :mod:`..io.reader_process`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from ..executors.idle import WorkerIdle, call_until_idle
from ..executors.worker import Worker, WorkerDied

Outcome = tuple[str, Any]
"""``("done", what the job gave)`` or ``("failed", why, in one line)``."""


def run_one(run: Callable[[Any], dict[str, Any]], item: Any) -> Outcome:
    """``run(item)``, where an input that cannot be read is an outcome, not an error (in the
    worker's process: what the error was crosses as one line)."""
    from .many import READ_ERRORS, first_line

    try:
        return "done", run(item)
    except READ_ERRORS as exc:
        return "failed", first_line(exc)


class Watched:
    """Runs ``run(item)`` in a worker process (see the module), made when first needed and
    again after one is stopped; ``written(item)``: the output the job writes, whose
    temporary file a stopped job leaves (``None``: it writes none)."""

    def __init__(self, timeout: float, written: Callable[[Any], Path] | None = None) -> None:
        self.timeout, self.written = timeout, written
        self._worker: Worker | None = None

    def __call__(self, run: Callable[[Any], dict[str, Any]], item: Any) -> Outcome:
        if self._worker is None:
            module = getattr(run, "func", run).__module__
            self._worker = Worker(run_one, name="hf-input", daemon=False, preload=(module,))
        try:
            outcome: Outcome = call_until_idle(self._worker, run, item, idle=self.timeout)
            return outcome
        except WorkerIdle as exc:
            self._stopped(item)
            return "failed", str(exc)
        except WorkerDied as exc:
            self._stopped(item)
            return "failed", f"the process reading it stopped: {exc}"
        except BaseException:  # (an error of the job, or Ctrl-C: the process goes too)
            self._stopped(item)
            raise

    def _stopped(self, item: Any) -> None:
        from ..io.publish import remove_stale_temps

        if self._worker is not None:
            self._worker.close()
            self._worker = None
        if self.written is not None:
            remove_stale_temps(self.written(item))

    def __enter__(self) -> Watched:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._worker is not None:
            self._worker.close()
            self._worker = None
