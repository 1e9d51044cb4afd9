"""Where a pack resumes (:func:`resume_point`), and that it continues the same frames: the
input's frame at the last stored index must be the stored one.

The store's input check (byte size, duration, a hash of the first packets) cannot see an
input that differs later on, nor frames numbered otherwise (a seek that lands elsewhere).
:func:`check_resumed_frame` decodes the input's frame at the last stored index and compares
it with what the store holds: exactly for lossless stores, to the store's PSNR bound for
lossy ones. ``pack --resume`` calls it once the store's input and settings are checked.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StoreError
from ..hyper.quality import psnr
from ..io.sources import open_input
from . import _env
from . import format as fmt
from .lmdb_store import FrameStore


def check_resumed_frame(
    store: str | os.PathLike[str],
    video: str | os.PathLike[str],
    frame: int,
    *,
    size: tuple[int, int] | None = None,
    pix_fmt: Any = "rgb24",
    rate: str | None = None,
) -> None:
    """Raise :class:`StoreError` unless frame ``frame`` of ``video`` (a video or an image
    sequence, read as the pack reads it: ``size``, ``pix_fmt``, ``rate``) is frame
    ``frame`` of ``store``."""
    delivery = "native" if pix_fmt == "native" else "rgb24"
    with FrameStore(store, hot_bytes=0, warm_bytes=0, read_ahead=False, pix_fmt=delivery) as held:
        stored, bound = held.get_frame_at(frame), held.header.psnr
    options = {"size": size, "pix_fmt": pix_fmt, "rate": rate}
    with open_input(video, start=frame, stop=frame + 1, **options) as source:
        decoded = np.empty((1, *source.spec.shape), source.spec.dtype)
        count = len(source.read_into(decoded))
    same = count == 1 and decoded[0].shape == stored.shape
    if same and not np.array_equal(decoded[0], stored):
        same = bound is not None and psnr(decoded[0], stored) >= bound - 0.01
    if not same:
        raise StoreError(
            f"frame {frame} of {str(video)!r} is not the frame {frame} stored in "
            f"{str(store)!r}: the input differs from the one packed (or numbers its frames "
            "otherwise); pack it into a new store, or pass --overwrite to start again"
        )


def resume_point(path: str | os.PathLike[str]) -> tuple[int, bool]:
    """``(frames committed, complete)`` of a store to resume; ``(0, False)`` when there is
    none yet, or when a pack was killed before it wrote the header.

    Raises:
        StoreError, StoreCorrupt: a store that cannot be read.
    """
    folder = Path(path)
    data = folder / _env.DATA_FILE
    if not data.is_file() or data.stat().st_size == 0:  # killed before LMDB wrote a page
        return 0, False
    handles = _env.acquire(folder, writable=False)
    try:
        with handles.env.begin() as txn:
            raw_header, raw_state = txn.get(fmt.HEADER_KEY), txn.get(fmt.STATE_KEY)
        if raw_header is None and raw_state is None:
            return 0, False
        fmt.parse_header(raw_header)
        state = fmt.parse_state(raw_state)
        return state.frames, state.complete
    finally:
        _env.release(folder)
