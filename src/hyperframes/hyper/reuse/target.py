"""Reuse that meets an accuracy target on the function's own answers.

``map(fn, reuse=ReuseTarget(0.95, agree="boxes"))``: the user says how often a frame's answer may
differ from what ``fn`` would have said on that frame (agreement as ``agree`` scores it,
see ``hyper.reuse.agree``); the stage computes as few frames as it can while its measured
agreement stays at the target. No per-clip tuning: it learns as the run goes.

How frames are decided (on one thread, in input order; the frames chosen are computed
on ``split`` threads of ``hyper.reuse._rows`` while the stage goes on):

1. **Look**: every frame gets a tiny thumbnail (``hyper.reuse.glance``, about 5 % of decoding).
2. **Plan**: a frame is to be computed when its answer's frame would be more than
   ``span`` frames back, or it moved more than ``reach`` from it (a cut).
3. **Compute in waves** (``hyper.reuse._waves``): a batch's planned frames start computing as
   it comes in, and the stage takes the next batch; once every worker has a call (or
   ``GATHER`` batches a worker have come in) it waits for every wave, decides on their
   answers together, and starts the next wave: what refining asks for and the next
   samples. So a step of refining never leaves a worker idle while frames planned later
   wait, and what is decided depends only on the answers, not on which call ends first.
4. **Refine**: where the answers at the two ends of a stretch disagree (score below the
   target), frames that cut the stretch's change into equal parts are computed (one per
   spare worker), until the ends of every stretch agree or meet: a cut is found in one
   or two steps. Between agreeing ends, a frame that strays from both (a shot that cuts
   away and back) is computed too, and the middle is computed where answers changed so
   often nearby that more of the frames between are guessed to differ than the target
   allows; a short stretch whose ends disagree a little is left as it is, within a share
   of the error budget (``hyper.reuse._stretches``). A hyperframe cut forces nothing by itself.
5. **Verify**: a random sample of the frames whose answers are settled (between computed
   frames, with nothing computing between) is computed, each scored against the answer
   it would have shared: a weighted, unbiased sample of how well shared answers agree
   (rates set by ``hyper.reuse._tally``). Then a wrong one is refined around, like any
   disagreement.
6. **Share**: a batch whose frames are all settled and sampled, with nothing computing,
   is handed on: each frame not computed takes the answer of the nearer (by thumbnail)
   of the computed frames before and after it. At most ``HOLD * split`` batches wait;
   beyond, the oldest shares the answers before it.

The evidence drives the rule: ``scale`` multiplies ``span``; it grows while planned
stretches' ends agree (and the samples say shared answers are good), shrinks when they
disagree so that about ``5 * (1 - target)`` of them do, and follows the samples so that
the shared answers' disagreement settles below a share of the error budget the target
leaves. ``reach`` has a scale of its own, ``moved``, which only frames planned for their
motion move (settling the same way, but never below 1): a camera that pans over a scene
whose answer stays the same stops planning a frame at every step, and one that pans
while answers churn does not start (those changes are ``span``'s and refining's to find).
Every call, verification included, counts as a call in every figure; the summary gives
the measured agreement of the output and a one-sided 95 % lower bound (stretches left
unrefined, which are not sampled, count at their estimated errors).

Longer than 300 lines: the plan, refining, sharing and the controller are one decision
over the frames held (``hyper.reuse._held``); what stands alone has modules of its own.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Callable, Collection, Sequence
from typing import Any

import numpy as np

from ...engine.figures import TargetFigures
from ...engine.stage import Strategy
from ...frames import Batch
from ._held import HeldFrames, copy_of
from ._rows import RowComputer, assemble
from ._stretches import Stretches, hidden
from ._tally import Tally, of_output
from ._waves import Sample, Waves
from .agree import Agreement
from .glance import change, even_cuts

SPAN = 16
"""Frames one answer may serve at ``scale`` 1 (at least 1, at most :data:`MAX_SPAN`)."""
MAX_SPAN = 512
REACH = 0.5
"""How far (:func:`~hyper.reuse.glance.change`) a frame may move from a computed one and still
share its answer, at ``scale`` 1."""
MARGIN = 0.6
"""The share of the error budget ``1 - target`` that shared answers aim to use."""
LEARN = 1.0
"""How fast ``scale`` follows the samples (per sample, in log units)."""
GROW = 1.2
"""``scale``'s step when the ends of a stretch agree; when they disagree it shrinks by the
step that makes it settle where ``5 * (1 - target)`` of stretches hold a change of answer
(half at 0.9), which refining finds in log2(span) calls: the stricter the target, the
shorter the stretches, and the fewer short changes of answer go unseen inside them."""
GATHER = 2
"""Batches a worker the stage takes while a worker is free, before it waits for the answers
computing (and starts what they call for)."""
HOLD = 6
"""Batches a worker the stage may hold back while their answers settle (refining, samples);
beyond, it waits for what computes, and then shares the answers before the oldest batch."""
RECENT = 0.25
"""Weight of the newest sample in the running agreement that gates growth."""
MEMORY = 64
"""Frames over which a sample fades to 1/e in the rate of wrong answers that sets the
sampling floor: a flickering shot early in a long input is not paid for in every later one
(nor, for long, in the still frames right after it)."""
FAR = 4.0
"""The most that lying far from its answer's frame (in :data:`SPAN` units) raises a shared
frame's odds of being sampled: past it, a long still shot would pay for its span in samples
(the cost of a stretch's samples grows with the square of its length)."""


class TargetReuse(Strategy):
    """Per-run state of a stage with an accuracy target (an ``engine.stage.Strategy``).

    Args:
        target: the agreement to keep, in (0, 1): 0.95 means the answers of the output
            agree with ``fn``'s own on 95 % of frames (on average, as ``agree`` scores).
        agree: scores two answers in [0, 1] (``hyper.reuse.agree.agreement``).
        stage: the stage's name (threads, messages).
        split: calls of ``fn`` made at once on parts of a batch.
        frames_out: ``fn`` returns frames (stacked into an array), not per-frame values.
        seed: the seed of the verification sample (a run is repeatable).
    """

    def __init__(
        self,
        target: float,
        agree: Agreement,
        *,
        stage: str,
        split: int = 1,
        frames_out: bool = False,
        seed: int = 0,
    ) -> None:
        self.target = float(target)
        self.agree = agree
        self.frames_out = frames_out
        self.rows = RowComputer(stage=stage, split=split)
        self.scale = 1.0
        self.moved = 1.0  # reach's own scale: whether moving pixels move the answers
        self._by_motion: set[int] = set()  # frames planned because they moved past reach
        self._budget = MARGIN * (1 - self.target)
        changing = min(0.5, 5 * (1 - self.target))  # the share of stretches aimed at
        self._shrink = GROW ** (-(1 - changing) / changing)  # (and of motion-planned frames)
        self._rng = np.random.default_rng(seed)
        self._lock = threading.Lock()  # summary() is read by monitors on other threads
        self.frames = self.calls = self.verified = self.refined = 0
        self._tally = Tally()  # the verified samples, weighted
        self._lately = Tally(memory=MEMORY)  # the same, fading: the sampling floor's
        self._held = HeldFrames()  # the batches, thumbnails and answers held, by position
        self._recent = 1.0  # running agreement of the latest samples
        self._stretches = Stretches()  # excursions found, stretches left as they are
        self._waves = Waves()  # what computes on the threads meanwhile
        self._fresh = 0  # batches taken since the answers were last waited for
        self._sampled_to = 0  # frames before it have had their chance to be sampled

    @property
    def span(self) -> int:
        return max(1, min(MAX_SPAN, round(SPAN * self.scale)))

    @property
    def reach(self) -> float:
        return REACH * math.sqrt(self.moved)

    # -- batches in, decided batches out ----------------------------------------------------

    def run(self, batch: Batch, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        start = self._held.add(batch)
        self._start(compute, planned=self._plan(start, batch.count))
        self._fresh += 1
        workers = self.rows.split
        free = len(self._waves.flying) < workers and self._fresh < GATHER * workers
        if free and len(self._held.batches) <= held(workers):
            return []  # a worker is free: take the next batch (within GATHER a worker)
        self._fresh = 0
        self._settle(compute)
        decided = self._hand_on(compute)
        while len(self._held.batches) > held(workers):
            # too many held: wait for what computes; if nothing does, the oldest batch's
            # frames share the answers before them
            oldest = self._held.first + self._held.batches[0][1].count
            self._settle(compute, until=0 if self._waves else oldest)
            decided += self._hand_on(compute)
        return decided

    def finish(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        if not self._held.batches:
            return []
        last = self._held.seen - 1
        if last not in self._held.answers and last not in self._waves.flying:
            self._start(compute, planned=[last])  # close the last stretch: nothing will
        while True:  # at least once: what is computed already may leave frames to sample
            self._settle(compute, until=self._held.seen)
            if not self._waves:
                return self._hand_on(compute)

    def _start(
        self,
        compute: Callable[[Batch], Any],
        *,
        planned: Sequence[int] = (),
        refined: Sequence[int] = (),
        samples: dict[int, Sample] | None = None,
    ) -> None:
        """Start computing frames on the threads (a wave), to settle when the next batch
        comes in (while the stage takes it, and the decoder decodes more); count the
        calls."""
        started = self._waves.start(
            self._held, self.rows, compute, planned=planned, refined=refined, samples=samples or {}
        )
        with self._lock:
            self.calls += started
            self.refined += len(refined)

    def _settle(self, compute: Callable[[Batch], Any], *, until: int = 0) -> None:
        """Wait for the waves computing and learn from their answers: score the samples,
        teach ``scale`` (and ``reach``) by the stretches that end at planned frames. Then
        start the next wave: the frames refining asks for, and samples of the frames whose
        answers are now settled (those before ``until`` even with no computed frame after
        them)."""
        got, planned, samples = self._waves.wait()
        self._held.answers.update(got)
        scored = [(self.agree(sample.shared, answer), sample) for sample, answer in samples]
        self._verified(scored)
        more, agreed = self._refine(set(planned))
        with self._lock:
            for q, ends_agree in agreed:
                # a frame planned for moving past reach teaches reach: how often motion
                # changes the answers;
                if q in self._by_motion:
                    self._rescale(GROW if ends_agree else self._shrink, moved=True)
                # and span, as one planned for its age: growing only while the samples
                # say shared answers are as good as aimed at
                if not ends_agree or self._recent >= 1 - self._budget:
                    self._rescale(GROW if ends_agree else self._shrink)
            self._by_motion -= {q for q, _ in agreed}
        self._start(compute, refined=more, samples=self._sample(self._settled(until, more)))

    def _settled(self, until: int, more: list[int]) -> list[int]:
        """The frames not computed, nor sampled before, whose answers are settled: before
        the last computed frame (or ``until``) and before every stretch with a frame that
        computes, or is to (``more``); except those of stretches left as they are (their
        cost is counted)."""
        ends = sorted(self._held.answers)
        horizon = max(ends[-1] if ends else 0, until)
        for f in [*self._waves.flying, *more]:
            k = bisect.bisect(ends, f)
            horizon = min(horizon, ends[k - 1] if k else 0)
        left = self._stretches.left_frames()
        answers = self._held.answers
        shared = [i for i in range(self._sampled_to, horizon) if i not in answers and i not in left]
        self._sampled_to = max(self._sampled_to, horizon)
        return shared

    def _hand_on(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        """Every batch whose frames are all settled and sampled, with nothing computing."""
        ready = min([self._sampled_to, *self._waves.flying])
        decided = []
        while (
            self._held.batches
            and self._held.batches[0][0] + self._held.batches[0][1].count <= ready
        ):
            decided += self._decide(compute)
        return decided

    def _verified(self, scored: list[tuple[float, Sample]]) -> None:
        """Learn from the samples, each scored against the answer it would have shared."""
        self._lately.age(self._held.seen)
        for score, sample in scored:
            self._stretches.learn(sample.guess, score)
            self._lately.add(score, weight=sample.weight)
        with self._lock:
            self.verified += len(scored)
            for score, sample in scored:
                self._recent += RECENT * (score - self._recent)
                self._rescale(math.exp(LEARN * sample.weight * (score - (1 - self._budget))))
                self._tally.add(score, weight=sample.weight)

    def _plan(self, start: int, count: int) -> list[int]:
        """Frames that moved past ``reach`` from the last computed frame before them, or
        whose answer would serve more than ``span`` frames."""
        span, reach = self.span, self.reach
        last = max([*self._held.answers, *self._waves.flying], default=None)
        ref = None if last is None else self._held.looks[last]
        age = 0 if last is None else start - 1 - last
        plan: list[int] = []
        for i in range(start, start + count):
            age += 1
            moved = ref is not None and age <= span and change(self._held.looks[i], ref) > reach
            if ref is None or age > span or moved:
                plan.append(i)
                ref, age = self._held.looks[i], 0
                if moved:
                    self._by_motion.add(i)
        return plan

    def _refine(self, planned: Collection[int]) -> tuple[list[int], list[tuple[int, bool]]]:
        """Frames to compute inside stretches: where the ends' answers disagree, and where
        a frame strays from agreeing ends; and whether each stretch that ends at a
        ``planned`` frame had agreeing ends (the evidence that ``scale`` follows)."""
        ends, scores, changed = self._stretches.compare(self._held.answers, self.agree, self.target)
        first = self._held.first  # frames before it are decided already
        agreed: list[tuple[int, bool]] = []
        stretches = []  # (p, q, where to start, ends agree, score): a look inside needed
        flying = sorted(self._waves.flying)
        for p, q in itertools.pairwise(ends):
            if q - p < 2 or bisect.bisect_right(flying, p) < bisect.bisect_left(flying, q):
                continue  # nothing between, or a frame between computes: refined already
            score = scores[p]
            ends_agree = score >= self.target
            if q in planned:
                agreed.append((q, ends_agree))
            if q - max(p + 1, first) >= 1:
                stretches.append((p, q, max(p + 1, first), ends_agree, score))
        # a stretch whose ends disagree is cut in as many parts as there are workers to
        # spare: fewer rounds of one call each, for a few more calls
        cuts = max(1, self.rows.split // max(1, sum(not agree for *_, agree, _ in stretches)))
        more: list[int] = []
        for p, q, start, ends_agree, score in stretches:
            if ends_agree:
                row = self._stretches.excursion(
                    self._held.looks, p, q, first=start, scale=self.scale
                )
                rows = [] if row is None else [row]
                if not rows and self._stretches.unseen(ends, changed, p, q) > 1 - self.target:
                    rows = even_cuts(self._held.looks, p, q, first=start, parts=cuts + 1)
            elif self._stretches.leave(
                p, q, disagreement=1 - score, budget=(1 - self.target) * self._held.seen
            ):
                rows = []
            else:
                rows = even_cuts(self._held.looks, p, q, first=start, parts=cuts + 1)
            more += [r for r in rows if r not in self._held.tried and r not in more]
        return more, agreed

    def _compute(self, frames: list[int], compute: Callable[[Batch], Any]) -> int:
        """Compute frames (positions in the stream) of the batches held; count the calls."""
        calls = self._held.compute(frames, self.rows, compute)
        with self._lock:
            self.calls += calls
        return calls

    def _decide(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        """Share answers into the oldest batch held and hand it on; a frame that failed
        for good (a dead letter) is dropped from it, not given another's answer."""
        held = self._held
        start, batch = held.batches[0]
        frames = range(start, start + batch.count)
        failed = {i for i in frames if i in held.tried and i not in held.answers}
        orphans = [i for i in frames if i not in held.tried and held.source(i) is None]
        self._compute(orphans, compute)  # nothing to share from: every computed frame failed
        values, origins = {}, {}
        for i in frames:
            src = held.source(i)
            if src is not None and i not in failed:
                values[i - start] = held.answers[i] if src == i else copy_of(held.answers[src])
                origins[i - start] = held.ids[src]
        with self._lock:
            self.frames += batch.count
        held.batches.pop(0)
        decided = start + batch.count  # what frames before it no longer need is dropped
        self._stretches.forget(decided, held.answers)
        held.forget(decided)
        self._by_motion = {e for e in self._by_motion if e >= decided}
        return [(batch, assemble(batch, values, frames_out=self.frames_out, origins=origins))]

    def _sample(self, shared: list[int]) -> dict[int, Sample]:
        """Shared frames to verify, each with its weight in the estimate: drawn at the
        tally's rate, raised by how far each moved from its answer's frame and by how many
        frames it lies from it (beyond ``SPAN``, up to :data:`FAR` times), never below the
        floor that the rate of wrong answers measured lately (:data:`MEMORY`) sets (see
        ``hyper.reuse._tally``). Each keeps the answer it shares now, and what :func:`hidden`
        guesses of its stretch, for its score to test."""
        chosen: dict[int, Sample] = {}
        reach, rate, floor = self.reach, self._tally.rate(), self._lately.floor(self._budget)
        ends, scores, changed = self._stretches.compare(self._held.answers, self.agree, self.target)
        for i in shared:
            source = self._held.source(i)
            if source is None:
                continue
            moved = change(self._held.looks[i], self._held.looks[source])
            far = max(1.0, min(FAR, abs(i - source) / SPAN))  # answers change with time too
            p = max(floor, min(0.5, rate * far * (1 + 2 * moved / reach)))
            if self._rng.random() < p:
                k = bisect.bisect(ends, i)  # its stretch: ends[k - 1], ends[k]
                agreeing = 0 < k < len(ends) and scores[ends[k - 1]] >= self.target
                guess = hidden(ends, changed, ends[k - 1], ends[k]) if agreeing else 0.0
                chosen[i] = Sample(rate / p, self._held.answers[source], guess)
        return chosen

    def _rescale(self, factor: float, *, moved: bool = False) -> None:
        if moved:  # never below 1: motion alone never plans more than at the start
            self.moved = min(MAX_SPAN / SPAN, max(1.0, self.moved * factor))
        else:
            self.scale = min(MAX_SPAN / SPAN, max(1 / (2 * SPAN), self.scale * factor))

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

    def close(self) -> None:
        """Stop the threads that compute rows (called at the end of a run)."""
        self.rows.close()


def held(split: int) -> int:
    """The most batches a stage with ``split`` workers holds back (:data:`HOLD` a worker)."""
    return HOLD * split
