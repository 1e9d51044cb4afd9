"""What ``hyper.reuse.policy`` remembers of the stretches between computed frames: the frame
that strays from a stretch's agreeing ends, the disagreeing stretches it leaves as they
are, and how far to trust a guess of the changes of answer hidden inside.

- **Excursions**: between two computed frames whose answers agree, the frame that looks
  least like either (a shot that cuts away and back, something passing through) is
  computed too when it strays further from both than they are from each other, and
  further than the tuning's ``excursion`` (times the square root of the stage's ``scale``). A
  stretch is looked into once.
- **Stretches left**: a short stretch whose ends disagree a little (at most ``price``
  frames' worth of errors: its frames times the ends' disagreement) is left as it is,
  its frames sharing the nearer end's answer, while such stretches stay within
  ``leave`` of the error budget. Where answers churn (boxes that move every frame),
  refining would compute every frame to save errors the target allows.
- **Hidden changes**: where answers were seen to change often (a detector that flickers
  from frame to frame where the frames look alike), two agreeing ends do not mean that
  the frames between them agree. :func:`hidden` guesses the share of them that differ,
  at the rate answers changed among the computed frames near the stretch; the samples
  that land in such stretches tell how many of the guessed errors are real
  (:meth:`Stretches.learn`), and a stretch is cut in two while the guess, so weighed,
  is over the error budget (:meth:`Stretches.unseen`). The computed frames already
  handed on count too, for ``near`` frames: what was seen near a stretch does not
  depend on how many frames a batch holds (fewer at 4K than at 720p).
"""

from __future__ import annotations

import bisect
import itertools
import math
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from .glance import change, changes
from .tuning import TUNING, Tuning


class Stretches:
    """The excursions found and the stretches left, keyed by their ends (positions), with
    the ``excursion``, ``leave``, ``price``, ``near`` and ``trust`` of ``tuning``."""

    def __init__(self, tuning: Tuning = TUNING) -> None:
        self.tuning = tuning
        self.left: dict[tuple[int, int], float] = {}  # stretches left, and their cost
        self.spent = 0.0  # the errors the stretches left are estimated to cost
        self.frames = 0  # the frames inside them (not sampled: their cost is counted)
        self._strays: dict[tuple[int, int, int], int | None] = {}  # excursions found
        self._guessed, self._found = tuning.trust  # wrong answers hidden() guessed, and found
        self._scores: dict[tuple[int, int], float] = {}  # of computed frames, pairwise
        self._past: list[int] = []  # computed frames handed on, within near of those held

    def leave(self, p: int, q: int, *, disagreement: float, budget: float) -> bool:
        """Whether to leave the stretch between disagreeing ``p`` and ``q`` as it is, given
        their ``disagreement`` (1 - score) and the error ``budget`` so far (the frames seen
        times ``1 - target``); once left, it stays left."""
        if (p, q) in self.left:
            return True
        cost = (q - p - 1) * disagreement
        if cost > self.tuning.price or self.spent + cost > self.tuning.leave * budget:
            return False
        self.left[(p, q)] = cost
        self.spent += cost
        self.frames += q - p - 1
        return True

    def compare(
        self, answers: dict[int, Any], agree: Callable[[Any, Any], float], target: float
    ) -> tuple[list[int], dict[int, float], list[int]]:
        """The computed frames (sorted, with those handed on within ``near``), the
        score of each against the next, and where answers change (the second frame of
        each pair of them scoring under ``target``)."""
        ends = sorted({*self._past, *answers})
        scores = {}
        for p, q in itertools.pairwise(ends):
            if (p, q) not in self._scores:  # pairs handed on were scored, or say nothing
                known = p in answers and q in answers
                self._scores[(p, q)] = agree(answers[p], answers[q]) if known else 1.0
            scores[p] = self._scores[(p, q)]
        return ends, scores, [q for p, q in itertools.pairwise(ends) if scores[p] < target]

    def unseen(self, ends: list[int], changed: list[int], p: int, q: int) -> float:
        """The share of the frames between agreeing ``p`` and ``q`` expected to differ
        from them unseen: :func:`hidden`'s guess, weighed by how it held so far."""
        return self._found / self._guessed * hidden(ends, changed, p, q, near=self.tuning.near)

    def learn(self, guessed: float, score: float) -> None:
        """A sample of a stretch where :func:`hidden` guessed a share ``guessed`` of
        wrong answers scored ``score`` against the answer it shares."""
        if guessed > 0:
            self._guessed += guessed
            self._found += 1 - score

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
            floor = self.tuning.excursion * math.sqrt(scale)
            strays = far[k] > max(floor, change(looks[p], looks[q]))
            self._strays[key] = first + k if strays else None
        return self._strays[key]

    def forget(self, decided: int, computed: Collection[int]) -> None:
        """Drop the stretches that end before ``decided``; of the ``computed`` frames
        before it (all of them, the last of which stays held), remember those within
        ``near`` of the last, with their scores."""
        done = [e for e in computed if e < decided]
        if done:
            since = max(done) - self.tuning.near
            self._past = sorted(e for e in {*self._past, *done} if e >= since)
        kept = self._past[0] if self._past else decided
        self._strays = {k: v for k, v in self._strays.items() if k[1] >= decided}
        self.left = {k: v for k, v in self.left.items() if k[1] >= decided}
        self._scores = {k: v for k, v in self._scores.items() if k[0] >= kept}


def hidden(ends: list[int], changed: list[int], p: int, q: int, *, near: int) -> float:
    """The share of the frames between computed ``p`` and ``q`` (whose answers agree)
    expected to differ from the answer they share, were answers to change inside as
    often as they were seen to change near it: ``changed`` (sorted: the second frame of
    each pair of consecutive computed frames whose answers differ) per frame computed
    ``ends`` (sorted) span within ``near`` frames of the stretch."""
    lo, hi = p - near, q + near
    found = bisect.bisect_right(changed, hi) - bisect.bisect_left(changed, lo)
    if not found or q - p < 2:
        return 0.0
    around = ends[bisect.bisect_left(ends, lo) : bisect.bisect_right(ends, hi)]
    rate = found / max(1, around[-1] - around[0])
    d = np.minimum(np.arange(1, q - p), np.arange(q - p - 1, 0, -1))  # to the nearer end
    return float(np.mean(1 - np.exp(-rate * d)))
