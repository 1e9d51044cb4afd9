"""Reuse that meets an accuracy target on the function's own answers.

``map(fn, reuse_target=0.95, agree="boxes")``: the user says how often a frame's answer may
differ from what ``fn`` would have said on that frame (agreement as ``agree`` scores it,
see ``hyper.agree``); the stage computes as few frames as it can while its measured
agreement stays at the target. No per-clip tuning: it learns as the run goes.

How frames are decided (on one thread, in input order; the frames chosen in each round are
computed ``split`` at a time by ``hyper._rows``, so a round keeps every worker busy):

1. **Look**: every frame gets a tiny thumbnail (``hyper.glance``, about 5 % of decoding).
2. **Plan**: a frame is to be computed when its answer's frame would be more than
   ``span`` frames back, or it moved more than ``reach`` from it (a cut). Batches are
   gathered until there is a planned frame for every worker; then a round computes them.
3. **Refine**: where the answers at the two ends of a stretch disagree (score below the
   target), frames that cut the stretch's change into equal parts are computed (one per
   spare worker), until the ends of every stretch agree or meet: a cut is found in one
   or two steps. Between agreeing ends, a frame that strays from both (a shot that cuts
   away and back) is computed too, and the middle is computed where answers changed so
   often nearby that more of the frames between are guessed to differ than the target
   allows; a short stretch whose ends disagree a little is left as it is, within a share
   of the error budget (``hyper._stretches``). A hyperframe cut forces nothing by itself.
4. **Verify**: a random sample of the frames that will share an answer (at rates set
   by ``hyper._tally``) is computed with the next round. The round first decides as if
   the samples had not been computed (``HeldFrames.hide``), and scores each against the
   answer it would then have shared: a weighted, unbiased sample of how well shared
   answers agree. Only then is a wrong one refined around, like any disagreement.
5. **Share**: a batch whose frames were all sampled, and whose samples are computed, is
   handed on: each frame not computed takes the answer of the nearer (by thumbnail) of
   the computed frames before and after it. At most ``3 * GATHER * split`` batches wait.

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
over the frames held (``hyper._held``); what stands alone has modules of its own.
"""

from __future__ import annotations

import bisect
import itertools
import math
import threading
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from ..engine.figures import TargetFigures
from ..frames import Batch
from ._held import HeldFrames, copy_of
from ._rows import RowComputer, assemble
from ._stretches import Stretches, hidden
from ._tally import Tally, of_output
from .agree import Agreement
from .glance import change, even_cuts

SPAN = 16
"""Frames one answer may serve at ``scale`` 1 (at least 1, at most :data:`MAX_SPAN`)."""
MAX_SPAN = 512
REACH = 0.5
"""How far (:func:`~hyper.glance.change`) a frame may move from a computed one and still
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
"""Batches a worker may wait for before a round runs with fewer calls than workers."""
RECENT = 0.25
"""Weight of the newest sample in the running agreement that gates growth."""


class TargetReuse:
    """Per-run state of a stage with an accuracy target (an ``engine.stage.Strategy``).

    Args:
        target: the agreement to keep, in (0, 1): 0.95 means the answers of the output
            agree with ``fn``'s own on 95 % of frames (on average, as ``agree`` scores).
        agree: scores two answers in [0, 1] (``hyper.agree.agreement``).
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
        self._guesses: dict[int, float] = {}  # samples pending: the share hidden() guessed wrong
        self._held = HeldFrames()  # the batches, thumbnails and answers held, by position
        self._recent = 1.0  # running agreement of the latest samples
        self._pending: dict[int, float] = {}  # samples chosen, to compute
        self._stretches = Stretches()  # excursions found, stretches left as they are
        self._planned: list[int] = []  # frames planned, to compute in the next round
        self._fresh = 0  # batches gathered since the last round
        self._window = 0  # the first frame of those batches
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
        self._planned += self._plan(start, batch.count)
        if self._fresh == 0:
            self._window = start  # the first frame of this round's batches
        self._fresh += 1
        work = len(self._planned) + len(self._pending)
        if work < self.rows.split and self._fresh < GATHER * self.rows.split:
            return []  # gather a call for every worker, within GATHER batches a worker
        return self._round(compute, final=False)

    def finish(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        if not self._held.batches:
            return []
        last = self._held.seen - 1
        if last not in self._held.answers and last not in self._planned:
            self._planned.append(last)  # close the last stretch: nothing will
        return self._round(compute, final=True)

    def _round(self, compute: Callable[[Batch], Any], *, final: bool) -> list[tuple[Batch, Any]]:
        """Compute what the batches gathered planned with the samples chosen last round (one
        call each, every worker busy), refine, choose the next samples, and hand on every
        batch whose frames were all sampled and whose samples are computed."""
        self._fresh = 0
        planned, self._planned = self._planned, []
        pending, self._pending = self._pending, {}
        agreed = self._computed(planned, pending, compute)
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
        ready = self._sampled_to  # frames before it were sampled, and the samples computed
        # frames before the last computed one (and before this round's batches: no batch
        # waits more than two rounds) share settled answers: sample them now, to compute
        # with the next round's plan (at the end of the input: now)
        last = self._held.seen if final else max(max(self._held.answers, default=0), self._window)
        left = self._stretches.left_frames()  # their cost is counted
        shared = [i for i in range(self._sampled_to, last) if i not in self._held.answers]
        chosen = self._sample([i for i in shared if i not in left])
        self._sampled_to = max(self._sampled_to, last)
        if final:
            self._computed([], chosen, compute)
            ready = self._held.seen
        else:
            self._pending = chosen
        decided = []
        while (
            self._held.batches
            and self._held.batches[0][0] + self._held.batches[0][1].count <= ready
        ):
            decided += self._decide(compute)
        return decided

    def _computed(
        self, planned: list[int], samples: dict[int, float], compute: Callable[[Batch], Any]
    ) -> list[tuple[int, bool]]:
        """Compute ``planned`` and ``samples`` at once; refine as if the samples had not
        been computed (see ``_refined``: what it returns), score them against the answers
        they would then have shared, and then refine around them."""
        self._compute(planned + list(samples), compute)
        self._held.hide(samples)
        agreed = self._refined(compute, planned=set(planned))
        self._verified(samples)
        self._held.show()
        self._refined(compute)
        return agreed

    def _verified(self, samples: dict[int, float]) -> None:
        """Score the hidden samples against the answers they would have shared; learn. A
        sample that refining asked for (shown again) would have been computed anyway."""
        scored = []
        held = self._held
        for i, weight in samples.items():
            source = held.source(i)
            if i in held.hidden and source is not None:
                scored.append((self.agree(held.answers[source], held.hidden[i]), weight))
                self._stretches.learn(self._guesses.get(i, 0.0), scored[-1][0])
        self._guesses = {}
        with self._lock:
            self.verified += len(scored)
            for score, weight in scored:
                self._recent += RECENT * (score - self._recent)
                self._rescale(math.exp(LEARN * weight * (score - (1 - self._budget))))
                self._tally.add(score, weight=weight)

    def _refined(
        self, compute: Callable[[Batch], Any], *, planned: Collection[int] = ()
    ) -> list[tuple[int, bool]]:
        """Refine until the ends of every stretch agree or meet; whether the ends of each
        stretch that ends at a ``planned`` frame agreed at first."""
        more, agreed = self._refine(planned)
        while more:
            calls = self._compute(more, compute)
            with self._lock:
                self.refined += calls
            more, _ = self._refine(())
        return agreed

    def _plan(self, start: int, count: int) -> list[int]:
        """Frames that moved past ``reach`` from the last computed frame before them, or
        whose answer would serve more than ``span`` frames."""
        span, reach = self.span, self.reach
        last = max([*self._held.answers, *self._planned], default=None)
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
        for p, q in itertools.pairwise(ends):
            if q - p < 2:
                continue
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
        """Share answers into the oldest batch held and hand it on."""
        held = self._held
        start, batch = held.batches[0]
        frames = range(start, start + batch.count)
        orphans = [i for i in frames if i not in held.answers and held.source(i) is None]
        self._compute(orphans, compute)  # nothing to share from: every computed frame failed
        values, origins = {}, {}
        for i in frames:
            src = held.source(i)
            if src is not None:
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

    def _sample(self, shared: list[int]) -> dict[int, float]:
        """Shared frames to verify, each with its weight in the estimate: drawn at the
        tally's rate, raised by how far each moved from its answer's frame, never below
        the floor the measured rate of wrong answers sets (see ``hyper._tally``). What
        :func:`hidden` guesses of each one's stretch is kept, for its score to test."""
        chosen: dict[int, float] = {}
        reach, rate, floor = self.reach, self._tally.rate(), self._tally.floor(self._budget)
        ends, scores, changed = self._stretches.compare(self._held.answers, self.agree, self.target)
        for i in shared:
            source = self._held.source(i)
            if source is None:
                continue
            moved = change(self._held.looks[i], self._held.looks[source])
            p = max(floor, min(0.5, rate * (1 + 2 * moved / reach)))
            if self._rng.random() < p:
                chosen[i] = rate / p
                k = bisect.bisect(ends, i)  # its stretch: ends[k - 1], ends[k]
                if 0 < k < len(ends) and scores[ends[k - 1]] >= self.target:
                    self._guesses[i] = hidden(ends, changed, ends[k - 1], ends[k])
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
    """The most batches a stage with ``split`` workers holds back: a round runs once every
    worker has a call (``GATHER`` batches a worker at most), handing on the one before."""
    return 3 * GATHER * split
