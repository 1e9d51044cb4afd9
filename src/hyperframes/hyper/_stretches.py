"""What ``hyper.target`` remembers of the stretches between computed frames: the frame
that strays from a stretch's agreeing ends, and the disagreeing stretches it leaves as
they are.

- **Excursions**: between two computed frames whose answers agree, the frame that looks
  least like either (a shot that cuts away and back, something passing through) is
  computed too when it strays further from both than they are from each other, and
  further than :data:`EXCURSION` (times the square root of the stage's ``scale``). A
  stretch is looked into once.
- **Stretches left**: a short stretch whose ends disagree a little (at most :data:`PRICE`
  frames' worth of errors: its frames times the ends' disagreement) is left as it is,
  its frames sharing the nearer end's answer, while such stretches stay within
  :data:`LEAVE` of the error budget. Where answers churn (boxes that move every frame),
  refining would compute every frame to save errors the target allows.
"""

from __future__ import annotations

import math

import numpy as np

from .glance import change, changes

EXCURSION = 0.1
"""How far a frame between two agreeing computed frames must stray from both (and more
than they differ from each other) to be computed too, at ``scale`` 1."""
LEAVE = 0.3
"""The share of the error budget that disagreeing stretches left unrefined may use."""
PRICE = 2.0
"""The most errors (frames times the ends' disagreement) a stretch left unrefined may cost."""


class Stretches:
    """The excursions found and the stretches left, keyed by their ends (positions)."""

    def __init__(self) -> None:
        self.left: dict[tuple[int, int], float] = {}  # stretches left, and their cost
        self.spent = 0.0  # the errors the stretches left are estimated to cost
        self.frames = 0  # the frames inside them (not sampled: their cost is counted)
        self._strays: dict[tuple[int, int, int], int | None] = {}  # excursions found

    def leave(self, p: int, q: int, *, disagreement: float, budget: float) -> bool:
        """Whether to leave the stretch between disagreeing ``p`` and ``q`` as it is, given
        their ``disagreement`` (1 - score) and the error ``budget`` so far (the frames seen
        times ``1 - target``); once left, it stays left."""
        if (p, q) in self.left:
            return True
        cost = (q - p - 1) * disagreement
        if cost > PRICE or self.spent + cost > LEAVE * budget:
            return False
        self.left[(p, q)] = cost
        self.spent += cost
        self.frames += q - p - 1
        return True

    def left_frames(self) -> set[int]:
        """The frames inside the stretches left (their cost is counted already)."""
        return {i for p, q in self.left for i in range(p + 1, q)}

    def excursion(
        self, looks: dict[int, np.ndarray], p: int, q: int, *, first: int, scale: float
    ) -> int | None:
        """The frame in ``first..q-1`` between agreeing ``p`` and ``q`` that strays from
        both, if one does."""
        key = (p, q, first)
        if key not in self._strays:
            rows = np.stack([looks[r] for r in range(first, q)])
            far = np.minimum(changes(rows, looks[p]), changes(rows, looks[q]))
            k = int(np.argmax(far))
            floor = EXCURSION * math.sqrt(scale)
            strays = far[k] > max(floor, change(looks[p], looks[q]))
            self._strays[key] = first + k if strays else None
        return self._strays[key]

    def forget(self, decided: int) -> None:
        """Drop the stretches that end before ``decided``."""
        self._strays = {k: v for k, v in self._strays.items() if k[1] >= decided}
        self.left = {k: v for k, v in self.left.items() if k[1] >= decided}
