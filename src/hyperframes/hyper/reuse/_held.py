"""The batches a reuse stage with an accuracy target holds while their answers settle,
by their position in the stream, and the calls on their frames: ``hyper.reuse.policy``
decides which frames; :class:`HeldBatches` computes them (on ``_rows``' threads, or
in line) and remembers the frame index each answer belongs to.

Frames can be computed while the stage goes on (:meth:`HeldBatches.start`): their
batches stay held until the answers are in.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from ...frames import Batch
from ._rows import RowComputer


class HeldBatches:
    """What one stage holds (not thread-safe: its stage's one thread uses it)."""

    def __init__(self) -> None:
        self.seen = 0  # frames taken so far: the next batch starts here
        self.batches: list[tuple[int, Batch]] = []  # (position of its first frame, batch)
        self.ids: dict[int, int] = {}  # the frame index of each computed position

    def add(self, batch: Batch) -> int:
        """Hold ``batch``; the position of its first frame."""
        start, self.seen = self.seen, self.seen + batch.count
        self.batches.append((start, batch))
        return start

    def compute(
        self, frames: list[int], rows: RowComputer, compute: Callable[[Batch], Any]
    ) -> dict[int, Any]:
        """Compute ``frames`` (positions) of the batches held, all at once, and wait: their
        answers by position (a frame that failed for good has none). On the threads, not
        in line: waves may be computing, and the scratch slots are one a thread."""
        return self.start(frames, rows, compute)()

    def start(
        self,
        frames: list[int],
        rows: RowComputer,
        compute: Callable[[Batch], Any],
        *,
        inline: bool = False,
    ) -> Callable[[], dict[int, Any]]:
        """Start computing ``frames`` (positions) of the batches held, on ``rows``'
        threads; a function that waits for their answers, by position (a frame that failed
        for good has none). The batches must stay held until then."""
        spans = [
            (start, batch, [i - start for i in frames if start <= i < start + batch.count])
            for start, batch in self.batches
        ]
        spans = [span for span in spans if span[2]]
        wait = rows.start([(batch, rows_) for _, batch, rows_ in spans], compute, inline=inline)

        def answers() -> dict[int, Any]:
            got: dict[int, Any] = {}
            for (start, batch, _), results in zip(spans, wait(), strict=True):
                for row, answer in results.items():
                    got[start + row] = answer
                    self.ids[start + row] = int(batch.index[row])
            return got

        return answers

    def hand_on(self, kept: Collection[int]) -> tuple[int, Batch]:
        """The oldest batch, no longer held; the ids of computed frames not ``kept`` go."""
        oldest = self.batches.pop(0)
        self.ids = {e: i for e, i in self.ids.items() if e in kept}
        return oldest


def copy_of(value: Any) -> Any:
    """An answer to share with another frame: arrays copied (a frame may change its own)."""
    return value.copy() if isinstance(value, np.ndarray) else value
