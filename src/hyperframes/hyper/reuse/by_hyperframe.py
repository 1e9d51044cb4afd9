"""Compute once per hyperframe: ``.map(fn, reuse=ReuseByHyperframe())``, verified.

Inside a hyperframe (tagged by ``.group()``), the first frame is the *base*: ``fn`` runs
on it, and its result is shared by each later member whose distance to the base (exact
MSE, pixels in 0..1) is within the reuse bound. A member outside the bound is computed and
becomes the base for the members after it, so slow drift inside a hyperframe costs one
call per step of the bound, not one per frame.
A result is only ever shared from a base of the same hyperframe, checked by distance:
never across a hyperframe boundary, never unverified.

The stage keeps its state on one thread, in input order; the frames it must compute are
split into ``workers`` chunks computed at once, so a costly function still uses every core.

With ``verify_every=k`` every k-th shared result is computed anyway (and counted as a
call, not as reused); the report gives the measured error: PSNR of shared vs computed
frames, or for per-frame values their mean agreement as ``agree`` scores it
(``hyper.reuse.agree``: ``"equal"`` by default, ``"boxes"`` for detections). While the run
goes, :meth:`ReuseStrategy.quality` gives the PSNR of the mean MSE over the last
``recent`` verifications (``psnr_mean_recent`` in the summary), which monitors show as the
stage's PSNR.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

import numpy as np

from ...engine.figures import BoundFigures
from ...engine.stage import Strategy
from ...engine.watch import StageQuality
from ...errors import StageError
from ...frames import Batch, FramePool
from ._rows import RowComputer, assemble
from .agree import Agreement, equal

RECENT = 64
"""How many of the latest verifications the running PSNR (``psnr_mean_recent``) covers."""


class ReuseStrategy(Strategy):
    """Per-run state of a reusing stage (an ``engine.stage.Strategy``, and an
    ``quality()``: it measures its error on the verified frames).

    Args:
        bound: the largest member-to-base MSE that may share the base's result.
        verify_every: compute every k-th shared result anyway and measure the error.
        stage: the stage's name (for messages and thread names).
        split: chunks of the frames to compute that are computed at once.
        recent: how many of the latest verifications ``psnr_mean_recent`` covers.
        frames_out: the stage returns frames (stacked), not per-frame values.
        agree: scores a shared per-frame value against the computed one, in [0, 1].

    Raises:
        ValueError: ``verify_every`` or ``recent`` below 1.
    """

    def __init__(
        self,
        bound: float,
        *,
        verify_every: int | None,
        stage: str,
        split: int = 1,
        recent: int = RECENT,
        frames_out: bool = True,
        agree: Agreement = equal,
    ) -> None:
        if verify_every is not None and verify_every < 1:
            raise ValueError(f"verify_every must be at least 1, got {verify_every}")
        if recent < 1:
            raise ValueError(f"recent must be at least 1, got {recent}")
        self.bound = bound
        self.verify_every = verify_every
        self.stage = stage
        self.computed = 0
        self.reused = 0
        self.verified = 0
        # per verified frame: MSE (arrays) or 0/1 (values), kept as running figures so a
        # run of any length holds the same memory; read by monitors from other threads
        self._errors_lock = threading.Lock()
        self._error_sum = 0.0
        self._error_worst = 0.0
        self._recent: deque[float] = deque(maxlen=recent)
        self._values = not frames_out  # per-frame values: agreement, not PSNR
        self._shareable = 0  # members within the bound so far (the verify_every cadence)
        self._group = -1
        self._base: np.ndarray | None = None
        self._base_result: Any = None
        self._base_id = -1  # the frame index of the base whose result is carried
        self.frames_out = frames_out
        self.agree = agree
        self.rows = RowComputer(stage=stage, split=split)

    def summary(self) -> BoundFigures:
        """Counts, and the error measured on verified frames: ``verify_psnr_min`` (the
        worst frame) and ``psnr_mean_recent`` (the mean MSE of the last ``recent``
        verifications, as PSNR), ``None`` when exact; or for per-frame values
        ``verify_agreement``, their mean agreement as ``agree`` scores it, and
        ``verify_mismatch_rate`` (1 minus it)."""
        total = self.computed + self.reused
        with self._errors_lock:
            verified, worst, error_sum = self.verified, self._error_worst, self._error_sum
        figures = BoundFigures(
            computed=self.computed,
            reused=self.reused,
            calls_saved=round(self.reused / total, 4) if total else 0.0,
            verified=verified,
            reuse_bound_mse=self.bound,
            checks="values" if self._values else "frames",
        )
        if verified and self._values:
            return dataclasses.replace(
                figures,
                verify_agreement=round(1 - error_sum / verified, 6),
                verify_mismatch_rate=round(error_sum / verified, 6),
            )
        if verified:
            recent = self.quality()
            return dataclasses.replace(
                figures,
                verify_psnr_min=_db(worst),
                psnr_mean_recent=None if recent is None else _db(recent.mse),
            )
        return figures

    def quality(self) -> StageQuality | None:
        """PSNR of the mean MSE of the last ``recent`` verified frames (``inf`` when they
        were exact); ``None`` before the first verification, or when the results are
        per-frame values, not images."""
        with self._errors_lock:
            if not self._recent or self._values:
                return None
            count = len(self._recent)
            mean = sum(self._recent) / count
            window = self._recent.maxlen or count
        return StageQuality.of_mse(mean, samples=count, window=window)

    def finish(self, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        return []

    def run(self, batch: Batch, compute: Callable[[Batch], Any]) -> list[tuple[Batch, Any]]:
        from ..distance import frame_mse

        if "hyperframe" not in batch.meta:
            raise StageError(
                f"stage {self.stage!r} reuses results inside hyperframes, but its frames carry "
                "no hyperframe tags; add .group() before it"
            )
        frames, groups = batch.frames, batch.meta["hyperframe"]
        carried = self._base_result  # the result of a base from an earlier batch
        need: list[int] = []
        source: list[int | None] = [None] * batch.count  # row whose result a row shares
        verify: list[int] = []
        base_row: int | None = None
        for j in range(batch.count):
            if int(groups[j]) != self._group:
                self._group, self._base, base_row = int(groups[j]), frames[j].copy(), j
                self._base_result = None
                need.append(j)
                continue
            assert self._base is not None
            if frame_mse(frames[j], self._base) > self.bound:
                # too far from the base: computed, and the base for the members after it
                self._base, base_row = frames[j].copy(), j
                need.append(j)
                continue
            if base_row is None and carried is None:  # its base failed for good
                need.append(j)
                continue
            source[j] = base_row if base_row is not None else -1  # -1: the kept base result
            self._shareable += 1
            if self.verify_every and self._shareable % self.verify_every == 0:
                verify.append(j)  # computed anyway: a call, not a reuse
                need.append(j)
        computed = self.rows.compute(batch, need, compute)
        orphans = [
            j
            for j, src in enumerate(source)
            if src is not None and src >= 0 and src not in computed
        ]  # their base failed for good: compute them
        if orphans:
            computed.update(self.rows.compute(batch, orphans, compute))
            for j in orphans:
                source[j] = None
        self.computed += len(need) + len(orphans)
        values: dict[int, Any] = {}
        origins: dict[int, int] = {}
        for j in range(batch.count):
            src = source[j]
            if j in computed:
                values[j], origins[j] = computed[j], int(batch.index[j])
            elif src is not None and j not in need:  # a frame that failed is a dead letter
                values[j] = _copy(carried) if src == -1 else _copy(computed[src])
                origins[j] = self._base_id if src == -1 else int(batch.index[src])
        self.reused += sum(1 for j in values if j not in computed)
        self._check(verify, source, computed, carried)
        if self._group >= 0 and base_row is not None and base_row in computed:
            self._base_result = _copy(computed[base_row])
            self._base_id = int(batch.index[base_row])
        return [(batch, assemble(batch, values, frames_out=self.frames_out, origins=origins))]

    def use_scratch(self, pool: FramePool) -> None:
        """The rows computed are copied into ``pool``'s slots (the run's plan made it)."""
        self.rows.use(pool)

    def close(self) -> None:
        """Stop the threads that compute chunks (called at the end of a run)."""
        self.rows.close()

    def _check(
        self, verify: list[int], source: list[int | None], computed: dict[int, Any], carried: Any
    ) -> None:
        from ..quality import mse

        for j in verify:
            src = source[j]
            shared = carried if src == -1 else computed.get(src)  # type: ignore[arg-type]
            if j not in computed or shared is None:
                continue
            exact = computed[j]
            if self.frames_out:
                error = float(mse(np.asarray(shared), np.asarray(exact)))
            else:
                error = 1.0 - float(self.agree(shared, exact))
            with self._errors_lock:
                self.verified += 1
                self._error_sum += error
                self._error_worst = max(self._error_worst, error)
                self._recent.append(error)


def _db(mse: float) -> float | None:
    """An MSE (pixels in 0..1) as PSNR in dB, rounded; ``None`` for an exact 0."""
    return round(-10 * math.log10(mse), 3) if mse > 0 else None


def _copy(value: Any) -> Any:
    return value.copy() if isinstance(value, np.ndarray) else value
