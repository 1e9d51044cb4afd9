"""The constants of reuse with an accuracy target, in one frozen object.

The policy (``policy``), its stretches (``_stretches``) and its tally (``_tally``) read
every tuned number from a :class:`Tuning`; :data:`TUNING` holds the values the
benchmark (``benchmarks/reuse_target.py``) was measured with. A user never needs another:
the rule learns as the run goes. A test or a study may pass its own
(``TargetReuse(..., tuning=Tuning(span=8))``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Tuning:
    """Attributes:
    span: frames one answer may serve at ``scale`` 1 (at least 1, at most ``max_span``).
    max_span: the most frames one answer may serve.
    reach: how far (``glance.change``) a frame may move from a computed one and still
        share its answer, at ``scale`` 1.
    margin: the share of the error budget ``1 - target`` that shared answers aim to use.
    learn: how fast ``scale`` follows the samples (per sample, in log units).
    grow: ``scale``'s step when the ends of a stretch agree; when they disagree it shrinks
        by the step that makes it settle where ``5 * (1 - target)`` of stretches hold a
        change of answer (half at 0.9), which refining finds in log2(span) calls.
    gather: batches a worker the stage takes while a worker is free, before it waits for
        the answers computing (and starts what they call for).
    hold: batches a worker the stage may hold back while their answers settle; beyond, it
        waits for what computes, and then shares the answers before the oldest batch.
    recent: weight of the newest sample in the running agreement that gates growth.
    memory: frames over which a sample fades to 1/e in the rate of wrong answers that sets
        the sampling floor (a flickering shot early on is not paid for in every later one).
    far: the most that lying far from its answer's frame (in ``span`` units) raises a
        shared frame's odds of being sampled.
    excursion: how far a frame between two agreeing computed frames must stray from both
        (and more than they differ) to be computed too, at ``scale`` 1.
    leave: the share of the error budget that disagreeing stretches left unrefined may use.
    price: the most errors (frames times the ends' disagreement) a stretch left
        unrefined may cost.
    near: how far around a stretch (frames) the changes of answer that ``hidden`` counts
        lie.
    trust: the prior of the trust in ``hidden``: wrong answers guessed, and found.
    rate: the share of shared frames verified at first (more where frames moved or
        answers were found wrong lately; less, down to an eighth, as agreeing samples add
        up).
    prior: pseudo-samples of the tally before any is measured.
    prior_wrong: the share of those pseudo-samples that were wrong.
    """

    span: int = 16
    max_span: int = 512
    reach: float = 0.5
    margin: float = 0.6
    learn: float = 1.0
    grow: float = 1.2
    gather: int = 2
    hold: int = 6
    recent: float = 0.25
    memory: float = 64.0
    far: float = 4.0
    excursion: float = 0.1
    leave: float = 0.3
    price: float = 2.0
    near: int = 16
    trust: tuple[float, float] = (1.0, 1 / 3)
    rate: float = 1 / 32
    prior: float = 4.0
    prior_wrong: float = 0.02

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            values = value if isinstance(value, tuple) else (value,)
            if any(isinstance(v, bool) or not isinstance(v, int | float) or v <= 0 for v in values):
                raise ValueError(f"Tuning.{field.name} must be a positive number, got {value!r}")
        shares = (self.margin, self.rate, self.leave, self.prior_wrong, self.recent)
        if self.span > self.max_span or self.grow <= 1 or max(shares) >= 1:
            raise ValueError(
                f"Tuning needs span <= max_span, grow > 1 and margin, rate, leave, "
                f"prior_wrong, recent < 1; got {self}"
            )

    def held(self, split: int) -> int:
        """The most batches a stage with ``split`` workers holds back (``hold`` a worker)."""
        return self.hold * split


TUNING = Tuning()
"""The tuning every run uses unless it is given another."""
