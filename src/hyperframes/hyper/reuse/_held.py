"""The frames a reuse stage with an accuracy target holds, by their position in the stream:
the batches not yet handed on, a thumbnail of each frame, the answers computed (and the
frame index each belongs to), and the frames tried. ``hyper.reuse.target`` decides on them;
:class:`HeldFrames` keeps them, computes frames of them, tells which computed frame a frame
shares its answer with, and forgets what decided batches no longer need.

Frames can be computed while the stage goes on (:meth:`HeldFrames.start`): their batches
stay held until the answers are in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...frames import Batch
from ._rows import RowComputer
from .glance import change, thumbnails


class HeldFrames:
    """What one stage holds (not thread-safe: its stage's one thread uses it)."""

    def __init__(self) -> None:
        self.seen = 0  # frames taken so far: the next batch starts here
        self.batches: list[tuple[int, Batch]] = []  # (position of its first frame, batch)
        self.looks: dict[int, np.ndarray] = {}
        self.answers: dict[int, Any] = {}
        self.ids: dict[int, int] = {}  # the frame index of each computed position
        self.tried: set[int] = set()

    def add(self, batch: Batch) -> int:
        """Hold ``batch`` and its frames' thumbnails; the position of its first frame."""
        start, self.seen = self.seen, self.seen + batch.count
        thumbs = thumbnails(batch.frames)
        for j in range(batch.count):
            self.looks[start + j] = thumbs[j]
        self.batches.append((start, batch))
        return start

    @property
    def first(self) -> int:
        """The position of the oldest frame held (frames before it are decided)."""
        return self.batches[0][0]

    def compute(self, frames: list[int], rows: RowComputer, compute: Callable[[Batch], Any]) -> int:
        """Compute ``frames`` (positions) of the batches held, all at once, and keep the
        answers. The number of calls made."""
        self.answers.update(self.start(frames, rows, compute, inline=True)())
        return len(frames)

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
        self.tried.update(frames)
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

    def source(self, i: int) -> int | None:
        """The computed frame whose answer frame ``i`` shares: itself if computed, else the
        nearer (by thumbnail) of the last computed one before it and the first one after."""
        if i in self.answers:
            return i
        before = max((e for e in self.answers if e < i), default=None)
        after = min((e for e in self.answers if e > i), default=None)
        if before is None:
            return after
        if after is None:
            return before
        look = self.looks[i]
        nearer_after = change(look, self.looks[after]) < change(look, self.looks[before])
        return after if nearer_after else before

    def forget(self, decided: int) -> None:
        """Drop what frames before ``decided`` no longer need: all but the last answer."""
        last = max((e for e in self.answers if e < decided), default=None)
        for e in [e for e in self.answers if e < decided and e != last]:
            del self.answers[e]
            self.ids.pop(e, None)
        keep = set(self.answers)
        for e in [e for e in self.looks if e < decided and e not in keep]:
            del self.looks[e]
        self.tried = {e for e in self.tried if e >= decided}


def copy_of(value: Any) -> Any:
    """An answer to share with another frame: arrays copied (a frame may change its own)."""
    return value.copy() if isinstance(value, np.ndarray) else value
