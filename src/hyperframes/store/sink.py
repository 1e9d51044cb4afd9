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
from typing import Any, TypedDict, Unpack

import numpy as np

from ..choices import Intra, Tier
from ..engine.plan import Plan, auto_batch, least_budget, plan_run
from ..errors import StoreError
from ..frames import FrameSpec
from ..hyper.grouping.grouper import DEFAULT_MAX_LEN
from ..hyper.grouping.tagging import grouping_footprint
from ..io.base import NOTHING, Footprint, Sink
from .writer import WORKERS, StoreWriter

ENCODING_COST = 3
"""Bytes a group being encoded takes, in units of its frames' bytes (the frames and the
encoder's working memory; ``encode_group`` of 11 4K frames peaked at 1.9x the group)."""


@dataclass(frozen=True)
class PackPlan:
    """A pack's longest hyperframe and the plan of its run (see :func:`plan_pack`)."""

    max_len: int
    run: Plan


def store_footprint(
    spec: FrameSpec, max_len: int, *, workers: int, pending_bytes: int | None = None
) -> Footprint:
    """What a :class:`StoreSink` holds outside the run's pools: the group it is filling
    (``max_len`` frames) and the groups being encoded, each :data:`ENCODING_COST` times its
    frames; at least one group, and up to ``2 * workers`` (or ``pending_bytes`` of them)."""
    group = max(1, max_len) * spec.nbytes
    if pending_bytes is not None:
        least = group + ENCODING_COST * max(group, pending_bytes)
        return Footprint("store", least=least, wants=least)
    least = group + ENCODING_COST * group
    return Footprint("store", least=least, wants=group + ENCODING_COST * 2 * workers * group)


def plan_pack(
    spec: FrameSpec,
    budget: int,
    *,
    min_len: int,
    max_len: int | None = None,
    batch_size: int | None = None,
    workers: int = 2,
    length: int | None = None,
    source: Footprint = NOTHING,
) -> PackPlan:
    """The longest hyperframe a pack of frames of ``spec`` can hold in ``budget`` bytes, and
    its run's plan: the same plan the run makes (``engine.plan``), with the grouping stage's
    held frames and the sink's group buffer and encoding queue in it, so the longest
    hyperframe follows the frames' bytes. Without ``max_len`` the default (60) is lowered
    until they fit at the automatic batch size (or ``batch_size``), beside what the
    ``source`` holds outside the pools (its decoder, :meth:`Source.footprint`): a 1 GiB
    budget gives 60 at 720p, 31 at 1080p and 7 at 4K without it. The interpreter is not in
    the budget.

    Raises:
        MemoryError: the budget cannot hold groups of ``max_len`` (or of ``min_len``).
    """
    batch = batch_size or auto_batch(spec)
    if length is not None and length > 0:
        batch = min(batch, 1 << max(0, (length - 1).bit_length()))
    lengths = [max_len] if max_len is not None else range(DEFAULT_MAX_LEN, max(1, min_len) - 1, -1)
    for longest in lengths:
        if longest < max(1, min_len):
            break
        grouping = grouping_footprint(max_len=longest, min_len=min_len)
        sink = store_footprint(spec, longest, workers=workers)
        try:
            plan = plan_run(spec, [grouping], budget=budget, sink=sink, source=source,
                            batch_size=batch, length=length)  # fmt: skip
        except MemoryError:
            continue
        return PackPlan(longest, plan)
    longest = max(max_len or 0, min_len, 1)
    grouping = grouping_footprint(max_len=longest, min_len=min_len)
    sink = store_footprint(spec, longest, workers=workers)
    need = least_budget(spec, [grouping], sink=sink, source=source, batch_size=1, length=length)
    raise MemoryError(
        f"a memory budget of {budget >> 20} MiB cannot pack hyperframes of {longest} frames "
        f"of {spec.describe()}; pass memory= of at least {-(-need >> 20)}MiB or a smaller "
        "max_len="
    )


class StoreOptions(TypedDict, total=False):
    """The options a :class:`StoreSink` hands its writer, as
    :class:`~hyperframes.store.writer.StoreWriter` takes them (and with its defaults)."""

    tier: Tier
    psnr: float | None
    level: int
    intra: Intra
    gop: int | None
    grouping: dict[str, Any] | None
    workers: int
    pending_bytes: int | None
    resume: bool
    overwrite: bool


class StoreSink(Sink):
    """Packs frames tagged by ``Pipeline.group()`` into the store at ``path``.

    Args:
        path: the store folder.
        tier: ``"lossless"`` (default), ``"psnr"`` or ``"keyframe"``.
        psnr: the target in dB for ``tier="psnr"``.
        level: zstd level.
        intra: how frames stored whole are coded, ``"gradient"``, ``"webp"`` (RGB),
            ``"ffv1"`` or ``"x264"`` (planes); see :class:`~hyperframes.store.writer.StoreWriter`.
        gop: with ``intra="x264"``, frames from one keyframe to the next (default 32).
        grouping: the grouping options to record; by default those the ``.group()``
            stage before the sink uses (what is recorded is checked on resume).
        workers: encoding threads.
        pending_bytes: the most bytes of frames the writer holds while groups are encoded;
            by default what the run's plan grants the sink (see :func:`store_footprint`):
            up to ``2 * workers`` groups, fewer where the memory budget is tight.
        resume: continue a partial store; the source must start at its first missing frame.
        overwrite: replace an existing store.

    ``close(ok=True)`` returns a summary dict (frames, hyperframes, raw_bytes,
    stored_bytes, ratio, psnr_min, resumed_from, path). After a failure the groups
    already complete are kept and the store stays resumable.
    """

    def __init__(self, path: str | os.PathLike[str], **options: Unpack[StoreOptions]) -> None:
        unknown = sorted(options.keys() - StoreOptions.__optional_keys__)
        if unknown:
            raise TypeError(f"StoreSink() got unexpected keyword arguments: {', '.join(unknown)}")
        self.path = Path(os.path.abspath(path))  # user code may change the working folder
        self.options = options
        self._writer: StoreWriter | None = None
        self._granted: int | None = None
        self._buffer: np.ndarray | None = None
        self._pts: np.ndarray | None = None
        self._filled = 0
        self._tag: int | None = None
        self._next = 0

    def footprint(self, spec: FrameSpec, facts: dict[str, Any]) -> Footprint:
        """The group it fills and the groups being encoded (see :func:`store_footprint`),
        with the ``max_len`` of the ``.group()`` stage before it."""
        grouping = facts.get("grouping") or self.options.get("grouping") or {}
        return store_footprint(
            spec, int(grouping.get("max_len", DEFAULT_MAX_LEN)),
            workers=self.options.get("workers", WORKERS),
            pending_bytes=self.options.get("pending_bytes"),
        )  # fmt: skip

    def grant(self, nbytes: int) -> None:
        self._granted = nbytes

    def open(self, spec: FrameSpec, info: dict[str, Any]) -> None:
        """Start the writer; the grouping recorded is the one the ``.group()`` stage used
        (``info["grouping"]``), which must agree with ``grouping=`` when both are given."""
        options = self.options.copy()
        used, given = info.get("grouping"), options.get("grouping")
        if used is not None and given is not None and used != given:
            raise StoreError(
                f"StoreSink(grouping={given}) differs from the options the .group() stage "
                f"uses ({used}); leave grouping= out: the sink records what the stage uses"
            )
        grouping = options["grouping"] = used if used is not None else given
        if options.get("pending_bytes") is None and self._granted is not None:
            # what the plan grants, less the group being filled, over the encoding's cost
            group = int((grouping or {}).get("max_len", DEFAULT_MAX_LEN)) * spec.nbytes
            options["pending_bytes"] = max(group, (self._granted - group) // ENCODING_COST)
        self._writer = StoreWriter(self.path, spec, info, **options)
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
        given = "".join(f", {name}={value!r}" for name, value in self.options.items())
        return f"StoreSink({str(self.path)!r}{given})"
