"""The frames a reuse stage with an accuracy target holds, by their position in the stream:
the batches not yet handed on, a thumbnail of each frame, the answers computed (and the
frame index each belongs to), and the frames tried. ``hyper.target`` decides on them;
:class:`HeldFrames` keeps them, computes frames of them, tells which computed frame a frame
shares its answer with, and forgets what decided batches no longer need.

Answers can be **hidden** for a while: the verification samples, so that the stage decides
(and scores each sample) as it would have without them; a hidden frame that the decision
asks for is shown again, at no call.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from ..frames import Batch
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
        self.hidden: dict[int, Any] = {}  # answers computed but hidden, by position

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
        answers; a hidden frame is shown instead. The number of calls made."""
        shown = [i for i in frames if i in self.hidden]
        for i in shown:
            self.answers[i] = self.hidden.pop(i)
        frames = [i for i in frames if i not in shown]
        self.tried.update(shown)
        self.tried.update(frames)
        parts = [
            (batch, [i - start for i in frames if start <= i < start + batch.count])
            for start, batch in self.batches
        ]
        got: dict[int, Any] = {}
        results = rows.compute_many(parts, compute)  # all at once, across batches
        for (start, batch), answers in zip(self.batches, results, strict=True):
            for row, answer in answers.items():
                got[start + row] = answer
                self.ids[start + row] = int(batch.index[row])
        self.answers.update(got)
        return len(frames)

    def hide(self, frames: Collection[int]) -> None:
        """Hide the answers of computed ``frames``: they count as not computed (not tried)
        until :meth:`show`, or until :meth:`compute` asks for one."""
        for i in frames:
            if i in self.answers:
                self.hidden[i] = self.answers.pop(i)
                self.tried.discard(i)

    def show(self) -> None:
        """Show every hidden answer again."""
        self.answers.update(self.hidden)
        self.tried.update(self.hidden)
        self.hidden.clear()

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
