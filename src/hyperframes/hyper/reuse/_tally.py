"""A weighted sample of how well shared answers agree with the function's own, and a
one-sided lower bound on it (``hyper.reuse.target`` verifies shared answers at unequal rates and
weighs each sample to undo that bias).

Example:
    >>> tally = Tally()
    >>> for score in (1.0, 1.0, 0.0, 1.0):
    ...     tally.add(score, weight=1.0)
    >>> tally.mean, round(tally.bound(), 3)
    (0.75, 0.356)
"""

from __future__ import annotations

import math

from .tuning import TUNING, Tuning

Z = 1.645
"""One-sided 95 % normal quantile for the lower bound."""


class Tally:
    """Weighted agreement scores in [0, 1] (not thread-safe: its owner locks).

    Args:
        memory: frames over which a sample's weight fades to 1/e (:meth:`age`); by
            default none fades: the tally of a whole run.
        tuning: its ``rate``, ``prior`` and ``prior_wrong``.
    """

    def __init__(self, memory: float = math.inf, *, tuning: Tuning = TUNING) -> None:
        self.weight = self.weighted = self._weight_sq = 0.0
        self.memory = memory
        self.tuning = tuning
        self._at = 0  # the position the samples were last aged to

    def age(self, at: int) -> None:
        """Fade the samples as the stream went on to position ``at``: where answers went
        wrong long ago says little of now (a long input holds many shots)."""
        if at > self._at and self.memory < math.inf:
            keep = math.exp(-(at - self._at) / self.memory)
            self.weight *= keep
            self.weighted *= keep
            self._weight_sq *= keep * keep
        self._at = max(self._at, at)

    def add(self, score: float, *, weight: float) -> None:
        self.weight += weight
        self.weighted += weight * score
        self._weight_sq += weight * weight

    @property
    def mean(self) -> float | None:
        """The weighted mean agreement, ``None`` before any sample."""
        return self.weighted / self.weight if self.weight > 0 else None

    def wrong(self) -> float:
        """The share of wrong answers, with the tuning's ``prior`` pseudo-samples of which
        ``prior_wrong`` were wrong."""
        prior, wrong = self.tuning.prior, self.tuning.prior_wrong
        return (self.weight - self.weighted + prior * wrong) / (self.weight + prior)

    def rate(self) -> float:
        """The share of shared frames to verify where nothing moved: the tuning's ``rate``,
        lowered (down to an eighth) as agreeing samples add up."""
        return self.tuning.rate * max(0.125, math.sqrt(8 / max(8.0, self.weighted)))

    def floor(self, budget: float) -> float:
        """The least share of shared frames to verify so that answers that go wrong even
        where frames look alike (a detector that flickers) stay within ``budget``, the
        share of wrong answers allowed."""
        return min(0.95, max(0.0, 1 - budget / self.wrong()))

    def bound(self) -> float:
        """A Wilson score lower bound on the mean at the samples' effective count (0 before
        any sample)."""
        mean = self.mean
        if mean is None:
            return 0.0
        count = self.weight**2 / self._weight_sq
        z2 = Z * Z
        centre = mean + z2 / (2 * count)
        spread = Z * math.sqrt(mean * (1 - mean) / count + z2 / (4 * count * count))
        return max(0.0, (centre - spread) / (1 + z2 / count))


def of_output(
    frames: int, calls: int, shared_agreement: float, left: int = 0, left_errors: float = 0.0
) -> float | None:
    """The agreement of the whole output: computed frames agree, shared ones as measured,
    except ``left`` frames not sampled, whose errors are estimated as ``left_errors``.

    Example:
        >>> of_output(100, 20, 0.9, 10, 4.0)  # (20 + 70 * 0.9 + 10 - 4) / 100
        0.89
    """
    if not frames:
        return None
    left = min(left, frames - calls)
    sampled = frames - calls - left
    return round((calls + sampled * shared_agreement + left - left_errors) / frames, 4)
