"""Several run monitors as one (see ``engine.watch.Monitor``).

Example:
    >>> pipeline.run(monitor=Monitors([exporter, timeline]))  # doctest: +SKIP
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..engine.report import RunReport
    from ..engine.watch import Monitor, SnapshotFn


class Monitors:
    """Several monitors as one: started in order, stopped in reverse order.

    Every part is stopped even if one fails to stop; the first such error is re-raised.
    """

    def __init__(self, parts: list[Monitor]) -> None:
        self.parts = list(parts)

    def start(self, snapshot: SnapshotFn) -> None:
        """Start every part with the run's ``snapshot`` function; if one fails to start,
        stop those already started (with no report) and raise its error."""
        started: list[Monitor] = []
        try:
            for part in self.parts:
                part.start(snapshot)
                started.append(part)
        except BaseException:
            for part in reversed(started):
                part.stop(None)
            raise

    def stop(self, report: RunReport | None) -> None:
        error: BaseException | None = None
        for part in reversed(self.parts):
            try:
                part.stop(report)
            except BaseException as exc:
                error = error or exc
        if error is not None:
            raise error

    def find(self, kind: type) -> Any:
        """The first part of type ``kind``, or None."""
        return next((p for p in self.parts if isinstance(p, kind)), None)
