"""What reuse with an accuracy target decides: which frames to compute, which to sample,
what each frame shares. A pure function of what it has been shown, with no threads, no
pixels and no calls of its own, so each decision can be tested case by case.

The stage (``hyper.reuse.target``) shows it each batch's thumbnails (:meth:`TargetPolicy.take`,
which answers with the frames to compute now), tells it what it started computing
(:meth:`~TargetPolicy.started`) and what came back (:meth:`~TargetPolicy.learn`, which
answers with the next wave: frames to refine with, and samples), and asks how the oldest
batch's frames share answers once they are settled (:meth:`~TargetPolicy.shares`). How
the rule works is told in ``hyper.reuse.target``; its constants are in ``tuning``.

Longer than 300 lines: planning, refining, sampling, sharing and the controller that
tunes them are one decision over the same frames; what stands alone has its own modules
(``_stretches``, ``_tally``).
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Collection, Iterable
from typing import Any, NamedTuple

import numpy as np

from ...engine.figures import TargetFigures
from ._stretches import Stretches, hidden
from ._tally import Tally, of_output
from .agree import Agreement
from .glance import change, even_cuts
from .tuning import TUNING, Tuning


class Sample(NamedTuple):
    """A shared frame chosen for verification."""

    weight: float  # in the estimate: the inverse of its odds of being chosen, times the rate
    shared: Any  # the answer it would have shared
    guess: float  # the share of its stretch that hidden() guessed wrong


class TargetPolicy:
    """The decisions of one run (not thread-safe but for :meth:`summary`: the stage's one
    thread calls the rest).

    Args:
        target: the agreement to keep, in (0, 1).
        agree: scores two answers in [0, 1] (``hyper.reuse.agree.agreement``).
        workers: calls the stage makes at once (a disagreeing stretch is cut in as many
            parts as there are workers to spare).
        seed: the seed of the verification sample (a run is repeatable).
        tuning: the constants (:data:`~.tuning.TUNING` unless a study says otherwise).

    Attributes:
        seen: frames shown so far (positions ``0 .. seen - 1``).
        answers: the answers computed, by position (the frames decided drop all but the
            last).
        computing: positions started and not yet learned.
    """

    def __init__(
        self,
        target: float,
        agree: Agreement,
        *,
        workers: int = 1,
        seed: int = 0,
        tuning: Tuning = TUNING,
    ) -> None:
        self.target, self.agree, self.workers, self.tuning = float(target), agree, workers, tuning
        self.scale = 1.0
        self.moved = 1.0  # reach's own scale: whether moving pixels move the answers
        self._by_motion: set[int] = set()  # frames planned because they moved past reach
        self._budget = tuning.margin * (1 - self.target)
        changing = min(0.5, 5 * (1 - self.target))  # the share of stretches aimed at
        self._shrink = tuning.grow ** (-(1 - changing) / changing)  # (and of motion-planned)
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()  # summary() is read by monitors on other threads
        self.frames = self.calls = self.verified = self.refined = 0
        self._tally = Tally(tuning=tuning)  # the verified samples, weighted
        self._lately = Tally(memory=tuning.memory, tuning=tuning)  # fading: the floor's
        self._recent = 1.0  # running agreement of the latest samples
        self._stretches = Stretches(tuning)  # excursions found, stretches left
        self._sampled_to = 0  # frames before it have had their chance to be sampled
        self.seen = 0
        self.spans: list[tuple[int, int]] = []  # (first position, frames) of batches held
        self.looks: dict[int, np.ndarray] = {}
        self.answers: dict[int, Any] = {}
        self.tried: set[int] = set()
        self.computing: set[int] = set()

    @property
    def span(self) -> int:
        return max(1, min(self.tuning.max_span, round(self.tuning.span * self.scale)))

    @property
    def reach(self) -> float:
        return self.tuning.reach * math.sqrt(self.moved)

    # -- what the stage shows and tells ---------------------------------------------------

    def take(self, looks: np.ndarray) -> list[int]:
        """A batch came in with these thumbnails (``glance.thumbnails``): hold it; the
        frames to compute now: those that moved past ``reach`` from the last computed
        frame before them, or whose answer would serve more than ``span`` frames."""
        start, count = self.seen, len(looks)
        self.spans.append((start, count))
        self.seen += count
        for j in range(count):
            self.looks[start + j] = looks[j]
        span, reach = self.span, self.reach
        last = max([*self.answers, *self.computing], default=None)
        ref = None if last is None else self.looks[last]
        age = 0 if last is None else start - 1 - last
        plan: list[int] = []
        for i in range(start, start + count):
            age += 1
            moved = ref is not None and age <= span and change(self.looks[i], ref) > reach
            if ref is None or age > span or moved:
                plan.append(i)
                ref, age = self.looks[i], 0
                if moved:
                    self._by_motion.add(i)
        return plan

    def started(self, frames: Iterable[int], *, refined: int = 0) -> None:
        """The stage started computing ``frames`` (``refined`` of them to refine with)."""
        frames = list(frames)
        self.tried.update(frames)
        self.computing.update(frames)
        with self._lock:
            self.calls += len(frames)
            self.refined += refined

    def computed(self, answers: dict[int, Any], frames: Collection[int]) -> None:
        """``frames`` were computed at once, in line (no wave): their ``answers`` (a frame
        that failed for good has none)."""
        self.started(frames)
        self.computing.difference_update(frames)
        self.answers.update(answers)

    def learn(
        self,
        answers: dict[int, Any],
        frames: Collection[int],
        planned: Collection[int],
        samples: Iterable[tuple[Sample, Any]],
        *,
        until: int = 0,
    ) -> tuple[list[int], dict[int, Sample]]:
        """What the waves started came back with: ``answers`` of ``frames`` (those
        ``planned``, and each sample with the function's own answer). Score the samples,
        teach ``scale`` (and ``reach``) by the stretches that end at planned frames; the
        next wave: frames to refine with, and samples of the frames whose answers are now
        settled (those before ``until`` even with no computed frame after them)."""
        self.answers.update(answers)
        self.computing.difference_update(frames)
        self._verified([(self.agree(sample.shared, answer), sample) for sample, answer in samples])
        more, agreed = self._refine(set(planned))
        grow = self.tuning.grow
        with self._lock:
            for q, ends_agree in agreed:
                # a frame planned for moving past reach teaches reach: how often motion
                # changes the answers;
                if q in self._by_motion:
                    self._rescale(grow if ends_agree else self._shrink, moved=True)
                # and span, as one planned for its age: growing only while the samples
                # say shared answers are as good as aimed at
                if not ends_agree or self._recent >= 1 - self._budget:
                    self._rescale(grow if ends_agree else self._shrink)
            self._by_motion -= {q for q, _ in agreed}
        return more, self._sample(self._settled(until, more))

    def ready(self) -> int:
        """Frames before this position are settled and sampled, with nothing computing:
        a batch that ends by it can be handed on."""
        return min([self._sampled_to, *self.computing])

    def orphans(self) -> list[int]:
        """Frames of the oldest batch held with no answer to share: every computed frame
        failed (the stage computes them before :meth:`shares`)."""
        start, count = self.spans[0]
        return [
            i for i in range(start, start + count) if i not in self.tried and self.source(i) is None
        ]

    def shares(self) -> dict[int, int]:
        """Hand on the oldest batch held: each of its frames (by row) and the computed
        frame whose answer it takes (itself where computed); a frame that failed for good
        (a dead letter) is left out, not given another's answer. Call :meth:`forget`
        once the answers are taken."""
        start, count = self.spans.pop(0)
        frames = range(start, start + count)
        failed = {i for i in frames if i in self.tried and i not in self.answers}
        shared = {}
        for i in frames:
            src = self.source(i)
            if src is not None and i not in failed:
                shared[i - start] = src
        with self._lock:
            self.frames += count
        return shared

    def forget(self) -> None:
        """Drop what the frames handed on no longer need: all answers before the first
        frame held but the last, their thumbnails, stretches and tries."""
        decided = self.spans[0][0] if self.spans else self.seen
        self._stretches.forget(decided, self.answers)
        last = max((e for e in self.answers if e < decided), default=None)
        for e in [e for e in self.answers if e < decided and e != last]:
            del self.answers[e]
        for e in [e for e in self.looks if e < decided and e not in self.answers]:
            del self.looks[e]
        self.tried = {e for e in self.tried if e >= decided}
        self._by_motion = {e for e in self._by_motion if e >= decided}

    def source(self, i: int) -> int | None:
        """The computed frame whose answer frame ``i`` shares: itself if computed, else the
        nearer (by thumbnail) of the last computed one before it and the first one after."""
        if i in self.answers:
            return i
        before = max((e for e in self.answers if e < i), default=None)
        after = min((e for e in self.answers if e > i), default=None)
        if before is None or after is None:
            return after if before is None else before
        look = self.looks[i]
        nearer_after = change(look, self.looks[after]) < change(look, self.looks[before])
        return after if nearer_after else before

    # -- the decisions inside -------------------------------------------------------------

    def _settled(self, until: int, more: list[int]) -> list[int]:
        """The frames not computed, nor sampled before, whose answers are settled: before
        the last computed frame (or ``until``) and before every stretch with a frame that
        computes, or is to (``more``); except those of stretches left as they are (their
        cost is counted)."""
        ends = sorted(self.answers)
        horizon = max(ends[-1] if ends else 0, until)
        for f in [*self.computing, *more]:
            k = bisect.bisect(ends, f)
            horizon = min(horizon, ends[k - 1] if k else 0)
        left = self._stretches.left_frames()
        answers = self.answers
        shared = [i for i in range(self._sampled_to, horizon) if i not in answers and i not in left]
        self._sampled_to = max(self._sampled_to, horizon)
        return shared

    def _verified(self, scored: list[tuple[float, Sample]]) -> None:
        """Learn from the samples, each scored against the answer it would have shared."""
        self._lately.age(self.seen)
        for score, sample in scored:
            self._stretches.learn(sample.guess, score)
            self._lately.add(score, weight=sample.weight)
        tuning = self.tuning
        with self._lock:
            self.verified += len(scored)
            for score, sample in scored:
                self._recent += tuning.recent * (score - self._recent)
                step = tuning.learn * sample.weight * (score - (1 - self._budget))
                self._rescale(math.exp(step))
                self._tally.add(score, weight=sample.weight)

    def _refine(self, planned: Collection[int]) -> tuple[list[int], list[tuple[int, bool]]]:
        """Frames to compute inside stretches: where the ends' answers disagree, and where
        a frame strays from agreeing ends; and whether each stretch that ends at a
        ``planned`` frame had agreeing ends (the evidence that ``scale`` follows)."""
        ends, scores, changed = self._stretches.compare(self.answers, self.agree, self.target)
        first = self.spans[0][0] if self.spans else self.seen  # before it: decided already
        agreed: list[tuple[int, bool]] = []
        stretches = []  # (p, q, where to start, ends agree, score): a look inside needed
        computing = sorted(self.computing)
        for p, q in itertools.pairwise(ends):
            if q - p < 2 or bisect.bisect_right(computing, p) < bisect.bisect_left(computing, q):
                continue  # nothing between, or a frame between computes: refined already
            score = scores[p]
            ends_agree = score >= self.target
            if q in planned:
                agreed.append((q, ends_agree))
            if q - max(p + 1, first) >= 1:
                stretches.append((p, q, max(p + 1, first), ends_agree, score))
        # a stretch whose ends disagree is cut in as many parts as there are workers to
        # spare: fewer rounds of one call each, for a few more calls
        cuts = max(1, self.workers // max(1, sum(not agree for *_, agree, _ in stretches)))
        more: list[int] = []
        for p, q, start, ends_agree, score in stretches:
            if ends_agree:
                row = self._stretches.excursion(self.looks, p, q, first=start, scale=self.scale)
                rows = [] if row is None else [row]
                if not rows and self._stretches.unseen(ends, changed, p, q) > 1 - self.target:
                    rows = even_cuts(self.looks, p, q, first=start, parts=cuts + 1)
            elif self._stretches.leave(
                p, q, disagreement=1 - score, budget=(1 - self.target) * self.seen
            ):
                rows = []
            else:
                rows = even_cuts(self.looks, p, q, first=start, parts=cuts + 1)
            more += [r for r in rows if r not in self.tried and r not in more]
        return more, agreed

    def _sample(self, shared: list[int]) -> dict[int, Sample]:
        """Shared frames to verify, each with its weight in the estimate: drawn at the
        tally's rate, raised by how far each moved from its answer's frame and by how many
        frames it lies from it (beyond ``span``, up to ``far`` times), never below the
        floor that the rate of wrong answers measured lately (``memory``) sets (see
        ``_tally``). Each keeps the answer it shares now, and what :func:`hidden` guesses
        of its stretch, for its score to test."""
        chosen: dict[int, Sample] = {}
        reach, rate, floor = self.reach, self._tally.rate(), self._lately.floor(self._budget)
        ends, scores, changed = self._stretches.compare(self.answers, self.agree, self.target)
        span, far_most, near = self.tuning.span, self.tuning.far, self.tuning.near
        for i in shared:
            source = self.source(i)
            if source is None:
                continue
            moved = change(self.looks[i], self.looks[source])
            far = max(1.0, min(far_most, abs(i - source) / span))  # answers change with time
            p = max(floor, min(0.5, rate * far * (1 + 2 * moved / reach)))
            if self._rng.random() < p:
                k = bisect.bisect(ends, i)  # its stretch: ends[k - 1], ends[k]
                agreeing = 0 < k < len(ends) and scores[ends[k - 1]] >= self.target
                guess = hidden(ends, changed, ends[k - 1], ends[k], near=near) if agreeing else 0.0
                chosen[i] = Sample(rate / p, self.answers[source], guess)
        return chosen

    def _rescale(self, factor: float, *, moved: bool = False) -> None:
        most = self.tuning.max_span / self.tuning.span
        if moved:  # never below 1: motion alone never plans more than at the start
            self.moved = min(most, max(1.0, self.moved * factor))
        else:
            self.scale = min(most, max(1 / (2 * self.tuning.span), self.scale * factor))

    # -- figures --------------------------------------------------------------------------

    def summary(self) -> TargetFigures:
        """Calls, calls saved, the agreement of shared answers as sampled, the estimated
        agreement of the output and its one-sided 95 % lower bound, and the current rule."""
        with self._lock:
            frames, calls, verified, refined = self.frames, self.calls, self.verified, self.refined
            mean, low = self._tally.mean, self._tally.bound()
            span, reach = self.span, self.reach
            left, errors = self._stretches.frames, self._stretches.spent
        shared = frames - calls
        return TargetFigures(
            frames=frames,
            calls=calls,
            computed=calls,
            reused=shared,
            calls_saved=round(shared / frames, 4) if frames else 0.0,
            verified=verified,
            refined=refined,
            target=self.target,
            agreement_shared=None if mean is None else round(mean, 4),
            agreement=of_output(frames, calls, 1.0 if mean is None else mean, left, errors),
            agreement_bound=of_output(frames, calls, low, left, errors),
            span=span,
            threshold=round(reach, 5),
        )
