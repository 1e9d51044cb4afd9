"""Frames for a training loop: :class:`VideoDataset`, a torch ``IterableDataset`` that a
``DataLoader`` shares out among its workers and ranks, each frame (or clip) once an epoch.

The inputs (a video, an image sequence, a folder, a glob, a manifest or a list:
:func:`~.inputs.expand`) are fixed and sorted when the dataset is made, and cut into
*units*: the inputs themselves where there are at least as many as the loader has workers
in all ranks (``shards``), else each input cut into ``shards`` runs of its frames. Unit
``u`` goes to shard ``u % shards`` (shard = rank * workers + worker), so the shards never
overlap and together hold every unit; ``shuffle`` permutes the units the same way in every
worker, by ``seed`` and the epoch (:meth:`VideoDataset.set_epoch`). A worker reads its
units one after the other into a buffer of ``clip`` frames, so its memory stays flat
whatever the inputs' length. With ``batch_size`` a worker hands whole batches instead, read
in one go into shared memory (``DataLoader(dataset, batch_size=None)``) and laid out
channels first there (contiguous ``(n, C, H, W)``, which the loop makes float in two
thirds of the time a strided view takes): no sample by sample collation and no copy on
the way to the loop, in a few blocks of shared memory that the worker reuses once the
loop has let a batch go (:mod:`.shared_blocks`).

Example:
    >>> dataset = VideoDataset("clips/", fps=2, size=(224, 224))  # doctest: +SKIP
    >>> from torch.utils.data import DataLoader  # doctest: +SKIP
    >>> loader = DataLoader(dataset, batch_size=16, num_workers=2)  # doctest: +SKIP
    >>> for batch in loader:  # doctest: +SKIP
    ...     x = batch["frames"]  # (16, 3, 224, 224) uint8; batch["path"], ["frame"], ["time"]
    >>> batches = VideoDataset("clips/", size=(224, 224), batch_size=16)  # doctest: +SKIP
    >>> loader = DataLoader(batches, batch_size=None, num_workers=2)  # doctest: +SKIP
"""

from __future__ import annotations

import gc
import os
import random
import sys
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import cv2
import numpy as np

from .file_reader import open_item
from .inputs import Input, expand
from .shared_blocks import Blocks, ByValue, keep_mappings
from .tensors import import_torch
from .video_files import READ_ERRORS, OnError

torch = import_torch()
IterableDataset: Any = torch.utils.data.IterableDataset

THROUGH = 2
"""Frames a worker reads at a time before it lays them out channels first in a batch's
block (a batch of its own to read through would be 100 MiB more a worker at 1080p)."""


class VideoDataset(IterableDataset):
    """Every frame (or clip) of ``inputs`` once an epoch, shared out among a
    ``DataLoader``'s workers and the job's ranks.

    Args:
        inputs: a video, an image sequence, a folder, a glob, a manifest or a list of
            paths (as :class:`~.video_files.VideoFiles` takes them; a manifest's
            ``start``/``stop`` and ``at`` columns count).
        clip: frames a sample holds: 1 gives ``(C, H, W)`` frames, more ``(clip, C, H,
            W)`` clips of consecutive samples of one input (a run's last frames that make
            no whole clip are left out).
        size: ``(width, height)`` to read every frame at (needed where inputs differ).
        shuffle: permute the units (inputs, or runs of one) each epoch, by ``seed`` and
            the epoch, the same in every worker and rank.
        seed: the shuffle's seed.
        on_error: an input that cannot be opened or read: ``"skip"`` leaves it (or what
            is left of it) out of the epoch with a warning that names it and says why;
            ``"fail"`` raises, which ends the loader's epoch.
        rank, world_size: this process's place among the job's ranks; by default
            ``torch.distributed``'s where it is set up, else ``$RANK`` and
            ``$WORLD_SIZE``, else 0 of 1.
        batch_size: hand batches of this many samples, each read from one input in one
            go into shared memory, for ``DataLoader(dataset, batch_size=None)`` (an
            input's last batch may hold fewer); ``None`` hands samples one by one.
        source_options: how each input is read, as
            :func:`~.sources.open_input` takes it: a sampling (``fps``, ``at``,
            ``num_frames``, ``step``, ``keyframes``), ``colour``, ``rate``...

    Each sample is a dict: ``frames`` (uint8 tensor, channels first), ``path``, ``frame``
    (the first frame's index in its input) and ``time`` (its time, seconds). A batch is
    the same dict with ``frames`` ``(n, C, H, W)`` (``(n, clip, C, H, W)``), one
    ``path`` and a tensor of ``n`` each for ``frame`` and ``time``.
    """

    def __init__(
        self,
        inputs: str | os.PathLike[str] | Sequence[Any],
        *,
        clip: int = 1,
        size: tuple[int, int] | None = None,
        shuffle: bool = False,
        seed: int = 0,
        on_error: OnError = "skip",
        rank: int | None = None,
        world_size: int | None = None,
        batch_size: int | None = None,
        **source_options: Any,
    ) -> None:
        super().__init__()
        if isinstance(clip, bool) or int(clip) < 1:
            raise ValueError(f"clip must be 1 or more frames, got {clip!r}")
        if batch_size is not None and (isinstance(batch_size, bool) or int(batch_size) < 1):
            raise ValueError(f"batch_size must be 1 or more samples, or None; got {batch_size!r}")
        if on_error not in ("skip", "fail"):
            raise ValueError(f"on_error must be 'skip' or 'fail', got {on_error!r}")
        self.on_error = on_error
        self.inputs: list[Input] = expand(inputs)
        self.clip, self.size, self.shuffle, self.seed = int(clip), size, shuffle, seed
        self.rank, self.world_size = _place(rank, world_size)
        self.options = source_options
        self.epoch = 0
        self.batch_size = None if batch_size is None else int(batch_size)
        self._owner = keep_mappings(self)  # (this process keeps its workers' blocks mapped)

    def set_epoch(self, epoch: int) -> None:
        """The epoch the next pass is (it seeds the shuffle), as ``DistributedSampler``
        takes it."""
        self.epoch = int(epoch)

    def units(self, shards: int) -> list[tuple[int, int, int]]:
        """Every unit in the order the shards take them: ``(input, part, parts)``."""
        count = len(self.inputs)
        parts = 1 if count >= shards else shards
        units = [(k, part, parts) for k in range(count) for part in range(parts)]
        if self.shuffle:
            random.Random(self.seed * 1_000_003 + self.epoch).shuffle(units)
        return units

    def __iter__(self) -> Iterator[dict[str, Any]]:
        info = torch.utils.data.get_worker_info()
        workers, worker = (1, 0) if info is None else (info.num_workers, info.id)
        shards = workers * self.world_size
        shard = self.rank * workers + worker
        # a worker's batches go to the loop in shared blocks it reuses once let go
        if info is not None:
            _leave_inherited_objects_be()
        blocks = None
        if info is not None and self.batch_size is not None:
            blocks = Blocks(self._owner, worker)
        for k, part, parts in self.units(shards)[shard::shards]:
            try:
                yield from self._read(self.inputs[k], part, parts, blocks)
            except READ_ERRORS as exc:
                if self.on_error == "fail":
                    raise
                reason = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                warnings.warn(f"{self.inputs[k].path!r} is left out of this epoch ({reason}); "
                              "on_error='fail' stops instead", stacklevel=2)  # fmt: skip

    def _read(
        self, item: Input, part: int, parts: int, blocks: Blocks | None
    ) -> Iterator[dict[str, Any]]:
        """The samples of run ``part`` of ``parts`` of ``item`` (batches in ``blocks``,
        where given)."""
        source = open_item(item, size=self.size, **(_threads() | self.options))
        try:
            if parts > 1 and source.length is None:  # (a Matroska file says nothing)
                source.restrict(0, sys.maxsize)  # its frames listed, so counted
            total = source.length
            if parts > 1:
                clips = (total or 0) // self.clip
                first, stop = clips * part // parts, clips * (part + 1) // parts
                source.restrict(first * self.clip, stop * self.clip)
            elif total is not None and total % self.clip:
                source.restrict(0, total - total % self.clip)
            # (where the count is not known, clips come until fewer than a clip are left)
            samples = self.batch_size or 1
            batches = self.batch_size is not None
            through = np.empty((THROUGH, *source.spec.shape), np.uint8) if batches else None
            while True:
                shape = (samples * self.clip, *source.spec.shape)
                if through is not None:  # read a few frames at a time, laid out channels first
                    height, width, channels = source.spec.shape
                    planes = (shape[0], channels, height, width)
                    if blocks is not None:
                        frames, block = blocks.tensor(planes)
                    else:
                        frames, block = torch.empty(planes, dtype=torch.uint8), None
                    numbers, times = _fill(source, frames.numpy(), through)
                else:
                    frames, block = torch.empty(shape, dtype=torch.uint8), None
                    numbers, times = _fill(source, frames.numpy())
                whole = len(numbers) // self.clip
                if not whole:
                    return
                clips = frames[: whole * self.clip].view(whole, self.clip, *frames.shape[1:])
                if through is None:
                    clips = clips.permute(0, 1, 4, 2, 3)  # channels first, no copy
                firsts = slice(0, whole * self.clip, self.clip)
                if self.batch_size is None:
                    yield {"frames": clips[0, 0] if self.clip == 1 else clips[0],
                           "path": item.path, "frame": int(numbers[0]),
                           "time": float(times[0])}  # fmt: skip
                else:
                    batch = clips[:, 0] if self.clip == 1 else clips
                    yield _batch(batch, block, blocks, path=item.path, frame=numbers[firsts],
                                 time=times[firsts])  # fmt: skip
                if whole < samples:
                    return
        finally:
            source.close()


def _batch(frames: Any, block: int | None, blocks: Blocks | None, **values: Any) -> dict[str, Any]:
    """A batch as the loop gets it; from a worker (``blocks``), the frames on their block
    and the small arrays by value (as tensors of shared memory, each would cost a file
    descriptor passed and mapped)."""
    if blocks is None:
        return {"frames": frames} | {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v
                                     for k, v in values.items()}  # fmt: skip
    return {"frames": blocks.handed(frames, block)} | {
        k: ByValue(v) if isinstance(v, np.ndarray) else v for k, v in values.items()
    }


def _fill(source: Any, out: Any, through: np.ndarray | None = None) -> tuple[Any, Any]:
    """Read ``source`` into ``out`` until it is full or the source ends: the input's
    frame numbers and times (seconds; NaN where unknown) of the frames read. With
    ``through`` (a few frames ``(k, H, W, C)``), the frames are read into it a few at a
    time and laid out channels first in ``out`` ``(N, C, H, W)``, a plane at a time
    (OpenCV's split: 0.24 ms a 1080p frame, a sixth of a strided copy's time)."""
    numbers, times, done = [], [], 0
    while done < len(out):
        if through is None:
            got = source.read_into(out[done:])
        else:
            got = source.read_into(through[: len(out) - done])
            for frame, planes in zip(through[: len(got)], out[done:], strict=False):
                cv2.split(frame, list(planes))
        if not len(got):
            break
        numbers.append(np.asarray(got.meta.get("input_frame", got.index), np.int64))
        pts = got.meta.get("pts")
        times.append(np.full(len(got), np.nan) if pts is None else np.asarray(pts, np.float64))
        done += len(got)
    if not numbers:
        return np.empty(0, np.int64), np.empty(0, np.float64)
    return np.concatenate(numbers), np.concatenate(times)


_FROZEN_IN: list[int] = []


def _leave_inherited_objects_be() -> None:
    """In a worker forked from the loop's process, once: keep Python's garbage collector
    off the objects it inherited (``gc.freeze``), so that no collection writes to their
    pages and makes the worker copy them (55 MiB less PSS over the two workers of a 1080p
    loader; the time did not move)."""
    if os.getpid() not in _FROZEN_IN:
        _FROZEN_IN.append(os.getpid())
        gc.freeze()


def _threads() -> dict[str, int]:
    """In a ``DataLoader``'s worker, a decoder's share of the cores: the workers decode
    side by side, so each taking FFmpeg's own count would oversubscribe them (1080p read
    by 2 workers on 2 cores: 4-8 % faster on 1 thread each than on FFmpeg's count)."""
    info = torch.utils.data.get_worker_info()
    if info is None:
        return {}
    return {"threads": max(1, len(os.sched_getaffinity(0)) // info.num_workers)}


def _place(rank: int | None, world_size: int | None) -> tuple[int, int]:
    """This process's rank and the job's size: as given, else ``torch.distributed``'s,
    else the environment's, else 0 of 1."""
    if rank is None or world_size is None:
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            found = dist.get_rank(), dist.get_world_size()
        else:
            found = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
        rank = found[0] if rank is None else rank
        world_size = found[1] if world_size is None else world_size
    if not 0 <= rank < world_size:
        raise ValueError(f"need 0 <= rank < world_size, got rank={rank}, world_size={world_size}")
    return int(rank), int(world_size)
