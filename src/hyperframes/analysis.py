"""What hyperframes would do with a sequence, measured: ``analyze()`` and ``hyperframes analyze``.

One pass through the pipeline (source -> grouping stage -> an analysing sink) gives the
adjacent-frame MSE of every frame, the hyperframe boundaries, and a measured size
estimate: a sample of hyperframes spread over the sequence is encoded twice, with the
hyperframe codec and as independent frames (zstd per frame), so "worthwhile" rests on
what the codec actually achieves on this input, not on a rule of thumb.

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

from .engine.frames import FrameSpec
from .engine.pipeline import Pipeline
from .engine.runner import ProgressFn
from .hyper.codec import encode_group
from .hyper.grouping import GroupingOptions
from .io.base import Sink, Source
from .metrics.report import RunReport

SAMPLE_SHARE = 0.02
"""At most this share of the frames (and at least 32 frames) is encoded for the estimate, so
the estimate costs a few percent of the pass, not a second pass."""

WORTHWHILE_SAVING = 0.10
"""Hyperframes pay off when they store the sample at least this much smaller than zstd per frame."""

THRESHOLD_RANGE = (1e-4, 3e-3)


@dataclass(frozen=True)
class Analysis:
    """The findings of :func:`analyze` (``to_dict()`` gives the JSON keys)."""

    frames: int
    hyperframes: int
    mean_length: float
    merge_rate: float
    mse: dict[str, float]
    boundaries: list[int]
    recommended_threshold: float
    worthwhile: bool
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
    """Collects distances and boundaries; encodes a spread-out sample of hyperframes.

    Up to ``samples`` hyperframes, evenly spread, within a budget of 2 % of the frames.
    """

    def __init__(self, *, expected_frames: int | None, samples: int) -> None:
        self.samples = samples
        self._every = max(1, (expected_frames or 0) // max(samples, 1))
        self._budget = max(32, int(SAMPLE_SHARE * (expected_frames or 30_000)))
        self._distances: list[np.ndarray] = []
        self.boundaries: list[int] = []
        self._next_sample = 0
        self._group: int | None = None
        self._sampling = False
        self._held: list[np.ndarray] = []
        self.frames = 0
        self.sampled_groups = 0
        self.sampled_frames = 0
        self.raw_bytes = 0
        self.grouped_bytes = 0
        self.independent_bytes = 0

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        self.spec = spec

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        self._distances.append(meta["distance"].copy())
        groups = meta["hyperframe"]
        for j in range(len(index)):
            group = int(groups[j])
            if group != self._group:
                self._close_group()
                self._group = group
                self.boundaries.append(int(index[j]))
                self._sampling = (
                    self.frames >= self._next_sample and self.sampled_frames < self._budget
                )
            if self._sampling:
                self._held.append(frames[j].copy())
            self.frames += 1

    def close(self, *, ok: bool) -> Any:
        if ok:
            self._close_group()
        return None

    @property
    def distances(self) -> np.ndarray:
        return np.concatenate(self._distances) if self._distances else np.empty(0)

    def _close_group(self) -> None:
        if not self._held:
            return
        group = np.stack(self._held)
        self._held = []
        self.raw_bytes += group.nbytes
        self.grouped_bytes += len(encode_group(group).data)
        self.independent_bytes += len(encode_group(group, layout="independent").data)
        self.sampled_groups += 1
        self.sampled_frames += len(group)
        self._next_sample = self.frames + self._every


def analyze(
    source: Source,
    *,
    threshold: float | None = None,
    min_len: int | None = None,
    max_len: int | None = None,
    batch_size: int = 16,
    samples: int = 12,
    progress: ProgressFn | None = None,
) -> tuple[Analysis, RunReport]:
    """Group ``source`` and measure what hyperframes would save on it.

    Args:
        source: the frames (a video, images, an array source).
        threshold: grouping threshold; the measured default when omitted.
        min_len: shortest group (default from :class:`GroupingOptions`).
        max_len: longest group (default from :class:`GroupingOptions`).
        batch_size: frames per batch.
        samples: how many hyperframes, spread over the sequence, to encode for the estimate.
        progress: a progress callback, as for ``Pipeline.run``.
    """
    sink = AnalysisSink(expected_frames=source.length, samples=samples)
    report = (
        Pipeline.from_source(source, batch_size=batch_size)
        .group(threshold=threshold, min_len=min_len, max_len=max_len)
        .to(sink)
        .run(progress=progress)
    )
    figures = report.extra.get("group", {})
    distances = sink.distances[1:] if sink.frames else sink.distances
    finite = distances[np.isfinite(distances)]

    def stat(fn: Any) -> float:
        return float(fn(finite)) if len(finite) else 0.0

    grouped = sink.grouped_bytes / sink.raw_bytes if sink.raw_bytes else math.nan
    independent = sink.independent_bytes / sink.raw_bytes if sink.raw_bytes else math.nan
    saving = 0.0
    if sink.independent_bytes:  # one division: exactly 0.1 when 10 % smaller, not 1 - 0.9
        saving = (sink.independent_bytes - sink.grouped_bytes) / sink.independent_bytes
    worthwhile = bool(sink.raw_bytes) and saving >= WORTHWHILE_SAVING
    if not sink.raw_bytes:
        reason = "no frames to measure"
    else:
        reason = (
            f"on {sink.sampled_groups} sampled hyperframes ({sink.sampled_frames} frames) the "
            f"hyperframe codec stores {percent(grouped)} of raw vs {percent(independent)} for "
            f"zstd per frame: {verdict(saving)}"
        )
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
        estimate={
            "sampled_hyperframes": sink.sampled_groups,
            "sampled_frames": sink.sampled_frames,
            # unrounded: a ratio of a mostly black clip is far below 1e-4, and a saving
            # rounded to 0.1 could be under the threshold
            "stored_ratio": grouped if sink.raw_bytes else None,
            "per_frame_zstd_ratio": independent if sink.raw_bytes else None,
            "saving_vs_per_frame": saving,
            "worthwhile_saving": WORTHWHILE_SAVING,
        },
        threshold=threshold if threshold is not None else GroupingOptions().threshold,
        distances=sink.distances,
    )
    return analysis, report


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


def plot_timeline(analysis: Analysis, path: str) -> None:
    """Write a PNG of the adjacent-MSE timeline with the boundaries marked."""
    from .metrics.timeline import figure_class

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
    fig.savefig(path, dpi=100)
