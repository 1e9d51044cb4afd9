"""What hyperframes would do with a sequence, measured: ``analyze()`` and ``hyperframes analyze``.

One pass through the pipeline (source -> grouping stage -> an analysing sink) gives the
adjacent-frame MSE of every frame, the hyperframe boundaries, and a measured size
estimate: a few frames (a strip of their rows, for large frames) of up to ``samples``
hyperframes spread over the sequence are encoded with the hyperframe codec, whose base and
deltas give both the grouped size and the size of zstd per frame, so "worthwhile" rests on
what the codec actually achieves on this input, not on a rule of thumb. The estimate
encodes at most 16 MiB or 0.5 % of the frames' bytes, whichever is more, on a thread of its
own (``hyperframes._estimate``); ``samples=0`` turns it off.

Example:
    >>> from hyperframes.io.video import VideoSource
    >>> result, report = analyze(VideoSource("clip.mp4"))  # doctest: +SKIP
    >>> result.worthwhile, result.recommended_threshold  # doctest: +SKIP
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from ._estimate import SamplePlan, SizeSampler, plan_samples
from .engine.report import RunReport
from .engine.watch import Monitor, ProgressFn
from .executors import Executor
from .frames import FrameSpec
from .hyper.grouping.grouper import GroupingOptions
from .io.base import Sink, Source
from .pipeline import Pipeline

WORTHWHILE_SAVING = 0.10
"""Hyperframes pay off when they store the sample at least this much smaller than zstd per frame."""

THRESHOLD_RANGE = (1e-4, 3e-3)


@dataclass(frozen=True)
class Analysis:
    """The findings of :func:`analyze` (``to_dict()`` gives the JSON keys).

    ``worthwhile`` is ``None`` when the size estimate was turned off (``samples=0``).
    """

    frames: int
    hyperframes: int
    mean_length: float
    merge_rate: float
    mse: dict[str, float]
    boundaries: list[int]
    recommended_threshold: float
    worthwhile: bool | None
    reason: str
    estimate: dict[str, Any] = field(default_factory=dict)
    threshold: float = 0.0
    distances: np.ndarray = field(default_factory=lambda: np.empty(0), repr=False)

    def to_dict(self) -> dict[str, Any]:
        """The figures as JSON-ready values (without the per-frame distances)."""
        out = asdict(self)
        del out["distances"]
        return out


def recommend_threshold(distances: np.ndarray) -> float:
    """Twice the 90th percentile of adjacent MSE, kept within 1e-4 .. 3e-3.

    Nine transitions in ten then stay inside groups, with a margin for noise; cuts (far
    above) still split; the cap keeps slow fades and pans from drifting inside one group
    (see docs/hyperframes.md). A rule of thumb over measured distances, not a search.
    """
    finite = distances[np.isfinite(distances)]
    if not len(finite):
        return GroupingOptions().threshold
    low, high = THRESHOLD_RANGE
    return float(min(max(2 * float(np.percentile(finite, 90)), low), high))


class AnalysisSink(Sink):
    """Collects distances and boundaries, batch by batch; hands the frames to a
    :class:`~hyperframes._estimate.SizeSampler`, which copies only its few windows and
    encodes them on a thread of its own."""

    def __init__(self, plan: SamplePlan) -> None:
        self.sampler = SizeSampler(plan)
        self._distances: list[np.ndarray] = []
        self._starts: list[np.ndarray] = []
        self.frames = 0

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        self.spec = spec

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        pos = meta["hf_pos"]
        self._distances.append(meta["distance"].copy())
        self._starts.append(index[pos == 0].astype(np.int64))
        self.frames += len(index)
        self.sampler.feed(frames, pos, meta["hf_len"])

    def close(self, *, ok: bool) -> Any:
        if ok:
            self.sampler.finish()
        else:
            self.sampler.abandon()
        return None

    @property
    def boundaries(self) -> list[int]:
        """The first frame of every hyperframe, in order."""
        return np.concatenate(self._starts).tolist() if self._starts else []

    @property
    def distances(self) -> np.ndarray:
        return np.concatenate(self._distances) if self._distances else np.empty(0)


def analyze(
    source: Source,
    *,
    threshold: float | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
    batch_size: int | None = None,
    memory: int | str | None = None,
    samples: int = 12,
    progress: ProgressFn | None = None,
    monitor: Monitor | None = None,
    executor: str | Executor = "threads",
) -> tuple[Analysis, RunReport]:
    """Group ``source`` and measure what hyperframes would save on it.

    Args:
        source: the frames (a video, images, an array source).
        threshold: grouping threshold; the measured default when omitted.
        min_len: shortest group (default from :class:`GroupingOptions`).
        max_len: longest group (default from :class:`GroupingOptions`).
        batch_size: frames per batch; ``None`` sizes it by the frames' bytes.
        memory: the run's memory budget, as for ``Pipeline.run``.
        samples: the most hyperframes sampled for the size estimate; 0 turns it off
            (``worthwhile`` is then ``None``).
        progress: a progress callback, as for ``Pipeline.run``.
        monitor: watches the run live (metrics, plots, the live page), as for
            ``Pipeline.run``.
        executor: where the stages run, as for ``Pipeline.run``.

    Returns:
        The findings and the run's report.

    Raises:
        ValueError: a bad option (``samples`` below 0, a threshold out of range, ...).

    Note:
        The estimate encodes small windows (a few frames, a strip of their rows) of up to
        ``samples`` hyperframes spread over the input, at most 16 MiB or 0.5 % of its bytes,
        whichever is more (see ``hyperframes._estimate``), on a thread of its own, so analyze
        runs at about the speed of decoding; ``estimate["method"]`` says how it was made.
    """
    sink = AnalysisSink(plan_samples(source.length, source.spec, samples=samples))
    report = (
        Pipeline.from_source(source, batch_size=batch_size)
        .group(threshold=threshold, min_len=min_len, max_len=max_len)
        .to(sink)
        .run(memory=memory, progress=progress, monitor=monitor, executor=executor)
    )
    figures = report.extra.get("group", {})
    distances = sink.distances[1:] if sink.frames else sink.distances
    finite = distances[np.isfinite(distances)]

    def stat(fn: Any) -> float:
        return float(fn(finite)) if len(finite) else 0.0

    estimate = sink.sampler.summary()
    grouped, independent = estimate["stored_ratio"], estimate["per_frame_zstd_ratio"]
    saving = estimate["saving_vs_per_frame"]
    worthwhile: bool | None = grouped is not None and saving >= WORTHWHILE_SAVING
    if samples == 0:
        worthwhile, reason = None, "not estimated (samples=0)"
        estimate = {"method": "off"}
    elif grouped is None:
        reason = "no frames to measure"
    else:
        reason = (
            f"on {estimate['sampled_hyperframes']} sampled hyperframes ({_encoded(estimate)}) "
            f"the hyperframe codec stores {percent(grouped)} of raw vs {percent(independent)} "
            f"for zstd per frame: {verdict(saving)}"
        )
    if samples:
        estimate["worthwhile_saving"] = WORTHWHILE_SAVING
    analysis = Analysis(
        frames=sink.frames,
        hyperframes=int(figures.get("hyperframes", 0)),
        mean_length=float(figures.get("mean_length", 0.0)),
        merge_rate=float(figures.get("merge_rate", 0.0)),
        mse={
            "median": stat(np.median),
            "p90": stat(lambda d: np.percentile(d, 90)),
            "max": stat(np.max),
        },
        boundaries=sink.boundaries,
        recommended_threshold=recommend_threshold(distances),
        worthwhile=worthwhile,
        reason=reason,
        estimate=estimate,
        threshold=threshold if threshold is not None else GroupingOptions().threshold,
        distances=sink.distances,
    )
    return analysis, report


def _encoded(estimate: dict[str, Any]) -> str:
    """What the estimate encoded, e.g. ``"28 of their 420 frames encoded, 1/5 of the rows
    each; the rest extrapolated"``."""
    encoded, sampled, strips = (
        estimate["encoded_frames"],
        estimate["sampled_frames"],
        estimate["strips"],
    )
    text = f"{encoded} of their {sampled} frames encoded"
    if strips > 1:
        text += f", 1/{strips} of the rows each"
    return text + ("; the rest extrapolated" if sampled > encoded else "")


def percent(share: float, *, digits: int = 3, unlike: float | None = None) -> str:
    """``share`` as a percentage with ``digits`` significant digits: ``0.153`` gives
    ``"15.3%"``, ``0.000123`` gives ``"0.0123%"``, so a small share never prints as 0.

    Args:
        share: the value, 1.0 being 100 %.
        digits: significant digits (whole numbers keep all theirs: ``"100%"``).
        unlike: a value ``share`` must not look equal to unless it is: more digits are
            shown until the two print differently (``0.09996`` unlike ``0.1`` gives
            ``"9.996%"``, not ``"10.0%"``).
    """
    value = share * 100
    if not math.isfinite(value) or value == 0:
        return f"{value:g}%"
    shown = float(f"{value:.{digits}g}")  # 9.996 -> 10.0: count digits after the carry
    decimals = max(0, digits - 1 - math.floor(math.log10(abs(shown))))
    if unlike is not None and share != unlike:
        other = unlike * 100
        while round(value, decimals) == round(other, decimals) and decimals < 12:
            decimals += 1
    return f"{value:.{decimals}f}%"


def verdict(saving: float) -> str:
    """How much smaller the hyperframe codec stores the sample than zstd per frame, and
    which side of :data:`WORTHWHILE_SAVING` that is (compared unrounded, printed so that
    it shows), e.g. ``"9.96% smaller (under the 10% that pays off)"``."""
    bar = percent(WORTHWHILE_SAVING, digits=2)
    if saving < 0:
        return f"{percent(-saving)} larger (hyperframes pay off from {bar} smaller)"
    side = "at least" if saving >= WORTHWHILE_SAVING else "under"
    return f"{percent(saving, unlike=WORTHWHILE_SAVING)} smaller ({side} the {bar} that pays off)"


def plot_timeline(analysis: Analysis, path: str, *, overwrite: bool = False) -> None:
    """Write a PNG of the adjacent-MSE timeline with the boundaries marked (an output like
    any other: see ``io.publish``)."""
    from .metrics.timeline import figure_class, save_figure

    distances = analysis.distances
    fig = figure_class()(figsize=(12, 3.5))
    ax = fig.subplots()
    ax.semilogy(np.arange(1, len(distances)), np.maximum(distances[1:], 1e-12), lw=0.8)
    for b in analysis.boundaries[1:]:
        ax.axvline(b, color="tab:red", alpha=0.3, lw=0.6)
    ax.axhline(analysis.threshold, color="tab:green", ls="--", lw=1, label="threshold")
    ax.set_xlabel("frame")
    ax.set_ylabel("adjacent MSE (pixels 0..1)")
    ax.set_title(f"{analysis.frames} frames, {analysis.hyperframes} hyperframes")
    ax.legend(loc="upper right")
    fig.tight_layout()
    save_figure(fig, path, overwrite=overwrite)
