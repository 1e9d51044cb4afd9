"""``StoreSink``: the end of a pipeline that packs tagged frames into a store.

Frames must carry the tags of the ``.group()`` stage (``hyperframe``, ``hf_pos``,
``hf_len``). The sink copies each frame into a buffer sized for its group (so it
holds at most one group, ``max_len`` frames) and hands a full group to the
:class:`~hyperframes.store.writer.StoreWriter`, which encodes on a few threads and
commits in order, one transaction per group.

Example:
    >>> report = (Pipeline.from_source(VideoSource("in.mp4"), batch_size=16)
    ...           .group().to(StoreSink("in.hfs")).run())  # doctest: +SKIP
    >>> report.output["ratio"]  # doctest: +SKIP
    0.31
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._choices import Intra, Tier
from ..engine.sizing import auto_batch
from ..errors import StoreError
from ..frames import FrameSpec
from ..hyper.grouping import DEFAULT_MAX_LEN
from ..io.base import Sink
from .writer import StoreWriter

ENCODING_COST = 3
"""Bytes a group being encoded takes, in units of its frames' bytes (the frames and the
encoder's working memory; ``encode_group`` of 11 4K frames peaked at 1.9x the group)."""


@dataclass(frozen=True)
class PackPlan:
    """How a pack divides its memory budget (see :func:`plan_pack`).

    Attributes:
        max_len: the longest hyperframe.
        pools: the budget for the run's frame pools (``Pipeline.run(memory=)``).
        pending_bytes: what the writer may hold of groups being encoded.
    """

    max_len: int
    pools: int
    pending_bytes: int


def plan_pack(
    spec: FrameSpec,
    budget: int,
    *,
    min_len: int,
    max_len: int | None = None,
    batch_size: int | None = None,
) -> PackPlan:
    """Fit a pack into ``budget`` bytes: the pools, the sink's group buffer and the groups
    queued for encoding all hold whole frames, so the longest hyperframe follows the bytes.

    The grouping stage holds up to ``max_len + min_len`` frames (plus a few batches) in
    the pool, the sink copies the group it is filling, and the writer holds at least one
    group while it is encoded, with the encoder's working memory (measured: about twice
    the group's bytes): about ``5 * max_len`` frames in all. Without ``max_len`` the
    default (60) is lowered until they fit: a 1 GiB budget gives 60 at 720p, 33 at
    1080p and 6 at 4K. The interpreter and the decoder (about 0.3 GB at 4K) are not in
    the budget.

    Raises:
        MemoryError: the budget cannot hold groups of ``max_len`` (or of ``min_len``).
    """
    frame = max(1, spec.nbytes)
    batch = batch_size or auto_batch(spec)
    fixed = min_len + 7 * batch  # held batches' slack, the workers', source's and sink's
    fits = (budget // frame - fixed) // (2 + ENCODING_COST)
    longest = min(DEFAULT_MAX_LEN, fits) if max_len is None else max_len
    if longest < max(1, min_len) or longest > fits:
        need = ((2 + ENCODING_COST) * max(longest, min_len, 1) + fixed) * frame
        raise MemoryError(
            f"a memory budget of {budget >> 20} MiB cannot pack hyperframes of "
            f"{max(longest, min_len)} frames of {spec.describe()}; pass memory= of at least "
            f"{-(-need >> 20)}MiB or a smaller max_len="
        )
    buffer = longest * frame
    pools = (longest + fixed) * frame
    pending = max(buffer, (budget - pools - buffer) // ENCODING_COST)
    return PackPlan(longest, budget - buffer - ENCODING_COST * pending, pending)


class StoreSink(Sink):
    """Packs frames tagged by ``Pipeline.group()`` into the store at ``path``.

    Args:
        path: the store folder.
        tier: ``"lossless"`` (default), ``"psnr"`` or ``"keyframe"``.
        psnr: the target in dB for ``tier="psnr"``.
        level: zstd level.
        intra: how frames stored whole are coded, ``"gradient"``, ``"webp"`` (RGB) or
            ``"ffv1"`` (planes); see :class:`~hyperframes.store.writer.StoreWriter`.
        grouping: the grouping options to record; by default those the ``.group()``
            stage before the sink uses (what is recorded is checked on resume).
        workers: encoding threads.
        pending_bytes: the most bytes of frames the writer holds while groups are encoded
            (see :func:`plan_pack`); by default up to ``2 * workers`` groups.
        resume: continue a partial store; the source must start at its first missing frame.
        overwrite: replace an existing store.

    ``close(ok=True)`` returns a summary dict (frames, hyperframes, raw_bytes,
    stored_bytes, ratio, psnr_min, resumed_from, path). After a failure the groups
    already complete are kept and the store stays resumable.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        tier: Tier = "lossless",
        psnr: float | None = None,
        level: int = 3,
        intra: Intra = "gradient",
        grouping: dict[str, Any] | None = None,
        workers: int = 2,
        pending_bytes: int | None = None,
        resume: bool = False,
        overwrite: bool = False,
    ) -> None:
        self.path = Path(path)
        self.options: dict[str, Any] = dict(
            tier=tier, psnr=psnr, level=level, intra=intra, grouping=grouping, workers=workers,
            pending_bytes=pending_bytes, resume=resume, overwrite=overwrite,
        )  # fmt: skip
        self._writer: StoreWriter | None = None
        self._buffer: np.ndarray | None = None
        self._pts: np.ndarray | None = None
        self._filled = 0
        self._tag: int | None = None
        self._next = 0

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        """Start the writer; the grouping recorded is the one the ``.group()`` stage used
        (``info["grouping"]``), which must agree with ``grouping=`` when both are given."""
        options = dict(self.options)
        used, given = info.get("grouping"), options.pop("grouping")
        if used is not None and given is not None and used != given:
            raise StoreError(
                f"StoreSink(grouping={given}) differs from the options the .group() stage "
                f"uses ({used}); leave grouping= out: the sink records what the stage uses"
            )
        grouping = used if used is not None else given
        self._writer = StoreWriter(self.path, spec, info, grouping=grouping, **options)
        self._next = self._writer.frames

    def write(self, frames: np.ndarray, index: np.ndarray, meta: dict[str, np.ndarray]) -> None:
        """Buffer the frames of the current hyperframe; hand each full one to the writer."""
        writer = self._writer
        if writer is None:
            raise RuntimeError("StoreSink.write called before open()")
        if "hf_pos" not in meta or "hf_len" not in meta or "hyperframe" not in meta:
            raise ValueError(
                "StoreSink needs frames tagged with their hyperframe; add .group() before "
                ".to(StoreSink(...))"
            )
        if len(index) and int(index[0]) != self._next:
            raise StoreError(
                f"the store holds {self._next} frames, so the next frame must be {self._next}, "
                f"got frame {int(index[0])}; restart the source at frame {self._next}"
            )
        pos, length, tags = meta["hf_pos"], meta["hf_len"], meta["hyperframe"]
        pts = meta.get("pts")
        for j in range(len(frames)):
            if pos[j] == 0:
                self._start(int(length[j]), int(tags[j]))
            elif self._buffer is None or int(tags[j]) != self._tag or pos[j] != self._filled:
                raise StoreError(
                    f"frame {int(index[j])} is at position {int(pos[j])} of hyperframe "
                    f"{int(tags[j])}, but the sink expected position {self._filled} of "
                    f"{self._tag}; frames must arrive in order, tagged by .group()"
                )
            assert self._buffer is not None and self._pts is not None
            self._buffer[self._filled] = frames[j]
            self._pts[self._filled] = np.nan if pts is None else pts[j]
            self._filled += 1
            if self._filled == len(self._buffer):
                writer.write_group(self._buffer, pts=self._pts)
                self._buffer = self._pts = None
        self._next += len(frames)

    def close(self, *, ok: bool) -> dict[str, Any] | None:
        writer, self._writer = self._writer, None
        if writer is None:
            return None
        if ok and self._buffer is not None:
            writer.close(complete=False)
            raise StoreError(
                f"the input ended inside a hyperframe ({self._filled} of {len(self._buffer)} "
                "frames); the store was kept without it and can be resumed"
            )
        state = writer.close(complete=ok)
        if not ok:
            return None
        header = writer.header
        raw = state.frames * header.spec.nbytes
        return {
            "path": str(self.path),
            "frames": state.frames,
            "hyperframes": state.groups,
            "raw_bytes": raw,
            "stored_bytes": state.stored_bytes,
            "ratio": round(state.stored_bytes / raw, 6) if raw else None,
            "psnr_min": state.psnr_min,
            "resumed_from": writer.resumed_from,
        }

    def _start(self, length: int, tag: int) -> None:
        if self._buffer is not None:
            raise StoreError(
                f"hyperframe {self._tag} ended after {self._filled} of its "
                f"{len(self._buffer)} frames; frames must arrive in order, tagged by .group()"
            )
        writer = self._writer
        assert writer is not None
        spec = writer.header.spec
        self._buffer = np.empty((length, *spec.shape), spec.dtype)
        self._pts = np.empty(length, np.float64)
        self._filled, self._tag = 0, tag

    def __repr__(self) -> str:
        return f"StoreSink({str(self.path)!r}, tier={self.options['tier']!r})"
