"""``StoreInfo``: what a store says about its source, as one value object.

Example:
    >>> store.info.fps, store.info.timestamps[:3]  # doctest: +SKIP
    (25.0, array([0.  , 0.04, 0.08]))
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..frames import FrameSpec
from . import format as fmt


@dataclass(frozen=True)
class StoreInfo:
    """Source metadata kept by a store.

    Attributes:
        spec: shape and dtype of every frame.
        frames: frames committed.
        fps: the source's frame rate, or ``None`` when unknown.
        time_base: the source's time base as ``"num/den"``, or ``None``.
        timestamps: each frame's presentation time in seconds, read-only (NaN: unknown).
        source: every fact the source reported (JSON scalars).
        tier: the codec tier; ``psnr`` its target and ``psnr_min`` the worst frame's PSNR
            (``None`` when lossless).
        complete: whether the pack finished.
    """

    spec: FrameSpec
    frames: int
    fps: float | None
    time_base: str | None
    timestamps: np.ndarray = field(repr=False)
    source: dict[str, Any] = field(repr=False)
    tier: str = "lossless"
    psnr: float | None = None
    psnr_min: float | None = None
    complete: bool = False

    @classmethod
    def of(cls, header: fmt.StoreHeader, state: fmt.StoreState, pts: np.ndarray) -> StoreInfo:
        fps = header.source.get("fps")
        fps = float(fps) if isinstance(fps, int | float) and math.isfinite(fps) else None
        base = header.source.get("time_base")
        view = pts.view()
        view.flags.writeable = False
        return cls(
            header.spec, state.frames, fps, str(base) if base is not None else None, view,
            dict(header.source), header.tier, header.psnr, state.psnr_min, state.complete,
        )  # fmt: skip

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready facts (without the per-frame timestamps)."""
        return {
            "shape": list(self.spec.shape),
            "dtype": str(self.spec.dtype),
            "frames": self.frames,
            "fps": self.fps,
            "time_base": self.time_base,
            "tier": self.tier,
            "psnr": self.psnr,
            "psnr_min": self.psnr_min,
            "complete": self.complete,
            "source": self.source,
        }
