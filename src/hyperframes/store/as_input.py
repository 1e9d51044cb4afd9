"""A store named where a command reads its input (``hyperframes map STORE fn --out ...``):
its frames as they were stored (:class:`~.source.StoreSource`), and what a job needs of an
input besides: an identity for a results file's ``--resume`` (:func:`store_fingerprint`)
and its frames' times (:func:`store_frame_times`). :class:`StoreInput` makes a store one of
the inputs a job over many reads (a folder of stores, as ``pack INPUTS OUTDIR`` makes
one): importing this module registers it.

A store is read in the pixel format it holds, at its size or resized (``size``: OpenCV's
area average, :class:`~hyperframes.io.loop.Resized`); what would choose other frames
(``step``, ``fps``...) is refused in one line, not ignored.

Example:
    >>> source = open_store("clip.hfs", start=10)  # doctest: +SKIP
"""

from __future__ import annotations

import os
from typing import Any, cast

from ..io.base import Footprint, Source
from ..io.formats import PixFmt
from ..io.inputs import is_store
from ..io.kinds import InputKind, register
from ..io.loop import Resized
from ..io.positions import frame_range
from ..io.sampling import Sampling
from .lmdb_store import FrameStore
from .source import StoreSource

KEPT = {"step": 1, "rate": None, "keyframes": False, "fps": None, "at": None,
        "num_frames": None, "rotation": None, "colour": "ffmpeg"}  # fmt: skip
"""The reading options a store takes only as they are by default, and their defaults."""
SAYS = {"rate": "a store has its own frame rate",
        "rotation": "a store's frames are stored upright",
        "colour": "a store's frames are converted as they were stored"}  # fmt: skip
"""Why an option does not apply to a store; the others choose frames (not yet taken)."""


def open_store(
    path: str | os.PathLike[str],
    *,
    start: int = 0,
    stop: int | None = None,
    pix_fmt: PixFmt = "rgb24",
    size: tuple[int, int] | None = None,
    on_corrupt: str = "fail",
    **options: Any,
) -> Source:
    """Frames ``start..stop-1`` of the store at ``path``, in ``pix_fmt`` (``"native"`` or
    ``"yuv420p"``: a video's planes as stored; ``"rgb24"``: RGB), resized to ``size``
    (``(width, height)``) where given; ``on_corrupt`` is moot (every record is checked;
    a damaged one raises ``StoreCorrupt``).

    Raises:
        ValueError: an option that would change the frames (see :data:`KEPT`), or a range
            outside the store.
        StoreError, StoreCorrupt: as :class:`FrameStore`.
    """
    for name, value in options.items():
        if name not in KEPT:
            raise TypeError(f"open_store() got an unexpected keyword argument {name!r}")
        if value != KEPT[name]:
            why = SAYS.get(name, "frames are chosen from a video or images, not a store yet")
            flag = " (--every)" if name == "step" else ""  # (the command line's name)
            raise ValueError(
                f"{why}: {os.fspath(path)!r} cannot take {name}={value!r}{flag}; drop it"
            )
    native = pix_fmt in ("native", "yuv420p")
    if native and size is not None:
        raise ValueError(f"a store's planes are given as stored: {os.fspath(path)!r} cannot "
                         f"take size={size!r} with pix_fmt={pix_fmt!r}; drop one")  # fmt: skip
    source = StoreSource(path, start=start, stop=stop, pix_fmt="native" if native else "rgb24")
    if size is None or tuple(size) == (source.spec.shape[1], source.spec.shape[0]):
        return source
    return Resized(source, size)


def store_fingerprint(path: str | os.PathLike[str]) -> dict[str, Any]:
    """What identifies the store's frames for a job over them: its frames, their shape
    and type, its tier, and the identity of what it was made from (a store added to
    since, or packed anew from another input, is another input)."""
    from ..io.fingerprint import IDENTITY_KEYS

    with FrameStore(path, hot_bytes=0, read_ahead=False) as store:
        source = store.header.source or {}
        return {
            "store": True,  # (by what it holds, not by its name: a moved store is the same)
            "frames": len(store),
            "shape": list(store.spec.shape),
            "dtype": store.spec.dtype.str,
            "tier": store.header.tier,
            "source": {key: source[key] for key in IDENTITY_KEYS if key in source},
        }


def store_frame_times(path: str | os.PathLike[str]) -> list[float]:
    """Every frame's time in seconds from the first: as stored where the store kept its
    input's timestamps, else at its frame rate.

    Raises:
        ValueError: a store that holds neither.
    """
    with FrameStore(path, hot_bytes=0, read_ahead=False) as store:
        pts = store.groups.pts[: len(store)]
        if len(pts) and not (pts != pts).any():
            return [float(t - pts[0]) for t in pts]
        fps = (store.header.source or {}).get("fps")
        if not fps:
            raise ValueError(
                f"{os.fspath(path)!r} holds no timestamps and no frame rate; give frame "
                "indices instead of times"
            )
        return [k / float(fps) for k in range(len(store))]


class StoreInput(InputKind):
    """A store among the inputs of a job over many: read as :func:`open_store` reads it,
    its range in seconds by its frames' times (:func:`store_frame_times`)."""

    def holds(self, path: str) -> bool:
        return is_store(path)

    def __repr__(self) -> str:
        return "StoreInput()"

    def open(self, path: str, *, start: int, stop: int | None, **options: Any) -> Any:
        options.pop("threads", None)  # (a decoder's: a store's records decode on the reader)
        source = open_store(path, start=start, stop=stop, **options)
        source.start = start  # type: ignore[attr-defined]  # (what a job's reads take of
        source.sampling = Sampling.of()  # type: ignore[attr-defined]  # any input: every
        return source  # frame from start, as a video read whole gives them)

    def frames(self, path: str, start: Any, stop: Any) -> tuple[int, int | None]:
        return frame_range(path, start, stop, times=lambda: store_frame_times(path))

    def footprint(self, path: str, *, size: Any, pix_fmt: str) -> Footprint:
        """What its reads hold besides the pool (frames staged to be resized), as the
        source declares it."""
        try:
            source = open_store(path, size=size, pix_fmt=cast(PixFmt, pix_fmt))
        except (OSError, ValueError):  # (damaged: listed with its reason when reached)
            return Footprint("decoder")
        try:
            return source.footprint()
        finally:
            source.close()


register(StoreInput())
