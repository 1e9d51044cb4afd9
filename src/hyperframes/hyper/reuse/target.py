"""Reuse that meets an accuracy target on the function's own answers.

``map(fn, reuse=ReuseTarget(0.95, agree="boxes"))``: the user says how often a frame's answer may
differ from what ``fn`` would have said on that frame (agreement as ``agree`` scores it,
see ``hyper.reuse.agree``); the stage computes as few frames as it can while its measured
agreement stays at the target. No per-clip tuning: it learns as the run goes.

How frames are decided (by ``policy``, a pure function of what it has seen, on the
stage's one thread, in input order; the frames chosen are computed on ``split`` threads of
``_rows`` while the stage goes on, by :class:`TargetReuse`, which runs the calls):

1. **Look**: every frame gets a tiny thumbnail (``hyper.reuse.glance``, about 5 % of decoding).
2. **Plan**: a frame is to be computed when its answer's frame would be more than
   ``span`` frames back, or it moved more than ``reach`` from it (a cut).
3. **Compute in waves** (``hyper.reuse._waves``): a batch's planned frames start computing as
   it comes in, and the stage takes the next batch; once every worker has a call (or
   ``gather`` batches a worker have come in) it waits for every wave, decides on their
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
   of the computed frames before and after it. At most ``hold * split`` batches wait;
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

The constants named here are those of :class:`~.tuning.Tuning`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ...engine.figures import TargetFigures
from ...engine.stage import Strategy
from ...frames import Batch, FramePool
from ._held import HeldBatches, copy_of
from ._rows import RowComputer, assemble
from ._waves import Sample, Waves
from .agree import Agreement
from .glance import thumbnails
from .policy import TargetPolicy
from .tuning import TUNING, Tuning


class TargetReuse(Strategy):
    """Per-run state of a stage with an accuracy target (an ``engine.stage.Strategy``):
    the batches held and the calls, as its :class:`~.policy.TargetPolicy` decides.

    Args:
        target: the agreement to keep, in (0, 1): 0.95 means the answers of the output
            agree with ``fn``'s own on 95 % of frames (on average, as ``agree`` scores).
        agree: scores two answers in [0, 1] (``hyper.reuse.agree.agreement``).
        stage: the stage's name (threads, messages).
        split: calls of ``fn`` made at once on parts of a batch.
        frames_out: ``fn`` returns frames (stacked into an array), not per-frame values.
        seed: the seed of the verification sample (a run is repeatable).
        tuning: the policy's constants.
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
        tuning: Tuning = TUNING,
    ) -> None:
        self.policy = TargetPolicy(target, agree, workers=split, seed=seed, tuning=tuning)
        self.frames_out = frames_out
        self.tuning = tuning
        self.rows = RowComputer(stage=stage, split=split)
        self._held = HeldBatches()
        self._waves = Waves()  # what computes on the threads meanwhile
        self._fresh = 0  # batches taken since the answers were last waited for

    # -- batches in, decided batches out ----------------------------------------------------

    def run(self, batch: Batch, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        self._held.add(batch)
        self._start(compute, planned=self.policy.take(thumbnails(batch.frames)))
        self._fresh += 1
        workers, most = self.rows.split, self.tuning.held(self.rows.split)
        free = len(self.policy.computing) < workers and self._fresh < self.tuning.gather * workers
        if free and len(self._held.batches) <= most:
            return []  # a worker is free: take the next batch (within gather a worker)
        self._fresh = 0
        self._settle(compute)
        decided = self._hand_on(compute)
        while len(self._held.batches) > most:
            # too many held: wait for what computes; if nothing does, the oldest batch's
            # frames share the answers before them
            oldest = self._held.batches[0][0] + self._held.batches[0][1].count
            self._settle(compute, until=0 if self._waves else oldest)
            decided += self._hand_on(compute)
        return decided

    def finish(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        if not self._held.batches:
            return []
        last = self._held.seen - 1
        if last not in self.policy.answers and last not in self.policy.computing:
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
        comes in (while the stage takes it, and the decoder decodes more)."""
        samples = samples or {}
        self._waves.start(
            self._held, self.rows, compute, planned=planned, refined=refined, samples=samples
        )
        self.policy.started([*planned, *refined, *samples], refined=len(refined))

    def _settle(self, compute: Callable[[Batch], Any], *, until: int = 0) -> None:
        """Wait for the waves computing, tell the policy what came back, and start the
        next wave it asks for."""
        answers, frames, planned, samples = self._waves.wait()
        refined, sampled = self.policy.learn(answers, frames, planned, samples, until=until)
        self._start(compute, refined=refined, samples=sampled)

    def _hand_on(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        """Every batch whose frames are all settled and sampled, with nothing computing."""
        ready = self.policy.ready()
        decided = []
        while (
            self._held.batches
            and self._held.batches[0][0] + self._held.batches[0][1].count <= ready
        ):
            decided.append(self._decide(compute))
        return decided

    def _decide(self, compute: Callable[[Batch], Any]) -> tuple[Batch, Any]:
        """Share answers into the oldest batch held and hand it on."""
        policy = self.policy
        orphans = policy.orphans()  # nothing to share from: every computed frame failed
        if orphans:
            policy.computed(self._held.compute(orphans, self.rows, compute), orphans)
        start = policy.spans[0][0]
        values, origins = {}, {}
        for row, src in policy.shares().items():
            answer = policy.answers[src]
            values[row] = answer if src == start + row else copy_of(answer)
            origins[row] = self._held.ids[src]
        policy.forget()
        _, batch = self._held.hand_on(policy.answers)
        return batch, assemble(batch, values, frames_out=self.frames_out, origins=origins)

    def use_scratch(self, pool: FramePool) -> None:
        """The rows computed are copied into ``pool``'s slots (the run's plan made it)."""
        self.rows.use(pool)

    # -- figures --------------------------------------------------------------------------

    def summary(self) -> TargetFigures:
        """The policy's figures (see :meth:`~.policy.TargetPolicy.summary`)."""
        return self.policy.summary()

    def close(self) -> None:
        """Stop the threads that compute rows (called at the end of a run)."""
        self.rows.close()
