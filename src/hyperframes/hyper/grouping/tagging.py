"""The grouping stage: tags every frame with its hyperframe id and position.

It runs the streaming :class:`~hyperframes.hyper.grouping.grouper.Grouper` as an ordered
pipeline stage. A frame's group is final only once the grouper closes it, which can
be up to ``max_len + min_len`` frames later, so the stage holds batches back until
every frame in them is tagged; that bound is declared (``holds``) so the pool has room.

Tags written to ``batch.meta``:
    ``hyperframe``: the group id (0, 1, 2, ... in order), ``int64``.
    ``hf_pos``: the frame's position inside its group, ``int32``.
    ``hf_len``: the length of its group, ``int32``.
    ``distance``: the distance the grouper judged the frame by (to the previous frame,
    or to the group's first frame under the drift rule), ``float64``; NaN for frame 0.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

from ...engine.figures import GroupingFigures
from ...engine.stage import Stream
from ...frames import Batch
from ...io.base import Footprint
from ..distance import check_finite, frame_mse, peak_of
from .grouper import Grouper, GroupingOptions, Span


def grouping_footprint(*, max_len: int, min_len: int) -> Footprint:
    """What the grouping stage holds: a frame's group is final only once the grouper closes
    it, up to ``max_len + min_len`` frames later (and two batches besides); it keeps state
    across frames, so part of the input cannot be grouped alone."""
    return Footprint("group", held_frames=max_len + min_len, held_batches=2, stateful=True)


class GroupTagger(Stream):
    """An ordered stage (see ``engine.stage.Stream``) that tags frames with their group."""

    def __init__(self, options: GroupingOptions, *, batch_size: int) -> None:
        self.options = options
        self.grouper = Grouper(
            threshold=options.threshold,
            min_len=options.min_len,
            max_len=options.max_len,
            rule=options.rule,
            distance=options.distance,
        )
        footprint = grouping_footprint(max_len=options.max_len, min_len=options.min_len)
        self.holds = footprint.held(batch_size)
        self._held: deque[tuple[int, Batch]] = deque()  # (stream position of frame 0, batch)
        self._seen = 0
        self._tagged = 0
        self._groups = 0
        self._lengths: list[int] = []
        # adjacent exact distances are computed here on views of the slot, with no copy per
        # frame; only the last frame of each batch is kept for the next one
        self._bulk = options.rule == "adjacent" and options.distance == "exact"
        self._last: np.ndarray | None = None

    def push(self, batch: Batch) -> list[Batch]:
        batch.meta["hyperframe"] = np.full(batch.count, -1, np.int64)
        batch.meta["hf_pos"] = np.zeros(batch.count, np.int32)
        batch.meta["hf_len"] = np.zeros(batch.count, np.int32)
        self._held.append((self._seen, batch))
        self._seen += batch.count
        if self._bulk:
            distance = self._adjacent_distances(batch)
            spans = [s for d in distance.tolist() for s in self.grouper.push_distance(d)]
        else:
            distance = np.empty(batch.count, np.float64)
            spans = []
            for j, frame in enumerate(batch.frames):
                spans += self.grouper.push(frame)
                distance[j] = self.grouper.last_distance
        batch.meta["distance"] = distance
        if len(self._held) > self.holds:
            raise RuntimeError(
                f"internal error: the grouping stage holds {len(self._held)} batches, "
                f"more than the {self.holds} it declared"
            )
        return self._tag(spans)

    def _adjacent_distances(self, batch: Batch) -> np.ndarray:
        frames = batch.frames
        first = self.grouper.frames_seen
        if self._last is None:
            peak_of(frames.dtype)  # a supported dtype, or FrameError
        distance = np.empty(batch.count, np.float64)
        for j in range(batch.count):
            if frames.dtype.kind == "f":
                check_finite(frames[j], name=f"frame {first + j}")
            prev = frames[j - 1] if j else self._last
            distance[j] = math.nan if prev is None else frame_mse(prev, frames[j])
        if batch.count:
            if self._last is None:
                self._last = frames[-1].copy()
            else:
                np.copyto(self._last, frames[-1])
        return distance

    def finish(self) -> list[Batch]:
        ready = self._tag(self.grouper.finish())
        if self._held:
            raise RuntimeError("internal error: frames left untagged at the end of input")
        return ready

    def summary(self) -> GroupingFigures:
        frames = sum(self._lengths)
        groups = len(self._lengths)
        return GroupingFigures(
            frames=frames,
            hyperframes=groups,
            mean_length=round(frames / groups, 3) if groups else 0.0,
            merge_rate=round(1 - groups / frames, 6) if frames else 0.0,
            max_length=max(self._lengths, default=0),
        )

    def _tag(self, spans: list[Span]) -> list[Batch]:
        for span in spans:
            for first, batch in self._held:
                lo, hi = max(span.start, first), min(span.stop, first + batch.count)
                if lo >= hi:
                    continue
                rows = slice(lo - first, hi - first)
                batch.meta["hyperframe"][rows] = self._groups
                batch.meta["hf_pos"][rows] = np.arange(lo - span.start, hi - span.start)
                batch.meta["hf_len"][rows] = span.length
            self._groups += 1
            self._lengths.append(span.length)
            self._tagged = span.stop
        ready = []
        while self._held and self._held[0][0] + self._held[0][1].count <= self._tagged:
            ready.append(self._held.popleft()[1])
        return ready
