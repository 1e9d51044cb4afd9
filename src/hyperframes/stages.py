"""The stages the :class:`~hyperframes.pipeline.Pipeline` builder adds: a map (with its
window, its reuse strategy, its retries), and a generator's drawing call.

:func:`map_stages` checks how ``Pipeline.map``'s options combine and turns them into the
stage (and the halo stage a window needs in front of it); :func:`render_stage` is
``Pipeline.from_generator``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, Literal

import numpy as np

from .engine.faults import FaultPolicy
from .engine.stage import Call, Decided, Stage, Streamed, on_frames
from .engine.window import HaloStream, WindowCall, check_window, halo_footprint
from .frames import Batch, FrameSpec
from .hyper.agree import agreement
from .hyper.reuse import ReuseStrategy, mse_bound
from .hyper.target import TargetReuse, held
from .io.arrays import check_frame
from .io.base import Footprint

#: Where a rendered frame's expected shape comes from, as error messages say it.
RENDERED = "as the render's spec says (spec= in the API, --size on the command line)"


def map_stages(
    fn: Callable[..., Any],
    label: str,
    *,
    workers: int,
    spec: FrameSpec | None,
    queue: int | None,
    into: str | None,
    window: tuple[int, int] | None,
    stateful: bool,
    reuse: Literal["none", "base"],
    reuse_psnr: float | None,
    reuse_mse: float | None,
    verify_every: int | None,
    reuse_target: float | None,
    agree: str | Callable[[Any, Any], float] | None,
    retries: int,
    backoff: float,
) -> list[Stage]:
    """The stages of ``Pipeline.map(fn, ...)`` called ``label`` (see its arguments).

    Raises:
        ValueError: options that do not combine, or a bad value.
    """
    if reuse not in ("none", "base"):
        raise ValueError(f"reuse must be 'none' or 'base', got {reuse!r}")
    if reuse == "base" and window is not None:
        raise ValueError("reuse='base' and window= do not combine; use one per stage")
    if reuse == "none" and (reuse_psnr, reuse_mse, verify_every) != (None, None, None):
        raise ValueError("reuse_psnr=, reuse_mse= and verify_every= need reuse='base'")
    if reuse_target is not None and (reuse == "base" or window is not None):
        raise ValueError(
            "reuse_target= chooses the frames to compute itself; it does not combine with "
            "reuse='base' or window="
        )
    if agree is not None and reuse_target is None and reuse == "none":
        raise ValueError("agree= needs reuse_target= (or reuse='base' with verify_every=)")
    compare = agreement(agree, frames=into is None)
    faults = FaultPolicy(retries=retries, backoff=backoff) if retries else None
    stages: list[Stage] = []
    call: Call = on_frames
    if window is not None:
        before, after = check_window(window)
        halo = Streamed(lambda size: HaloStream(before, after), halo_footprint(before, after))
        stages.append(Stage(f"{label}:halo", kind=halo))
        call = WindowCall(before, after)
    kind: Decided | None = None
    if reuse == "base":
        bound = mse_bound(reuse_psnr=reuse_psnr, reuse_mse=reuse_mse)
        split, workers = workers, 1  # one thread keeps order; `split` compute at once
        plain = partial(
            ReuseStrategy,
            bound,
            verify_every=verify_every,
            stage=label,
            split=split,
            frames_out=into is None,
            agree=compare,
        )
        kind = Decided(plain, split)
    elif reuse_target is not None:
        target = check_target(reuse_target)
        split, workers = workers, 1
        targeted = partial(
            TargetReuse, target, compare, stage=label, split=split, frames_out=into is None
        )
        kind = Decided(targeted, split, Footprint(label, held_batches=held(split)))

    stages.append(
        Stage(
            label,
            fn,
            call,
            workers=workers,
            spec=spec,
            queue=queue,
            into=into,
            ordered=stateful,
            faults=faults,
            kind=kind,
        )
    )
    return stages


def render_stage(fn: Callable[[int], np.ndarray], spec: FrameSpec, workers: int) -> Stage:
    """The stage of ``Pipeline.from_generator(fn, ...)``: frames ``fn(i)`` drawn into the
    slot the source's indices fill."""
    return Stage(f"render:{name_of(fn)}", RenderInto(fn, spec), call=render_call, workers=workers)


class RenderInto:
    """Renders frames ``fn(i)`` into a batch's slot, checking each (picklable for executors)."""

    def __init__(self, fn: Callable[[int], np.ndarray], spec: FrameSpec) -> None:
        self.fn, self.spec = fn, spec

    def __call__(self, ids: np.ndarray, out: np.ndarray) -> None:
        name = name_of(self.fn)
        for j, i in enumerate(ids.tolist()):
            out[j] = check_frame(self.fn(i), self.spec, i, origin=f"{name}({i})", fixed_by=RENDERED)


def render_call(fn: Callable[..., Any], batch: Batch) -> None:
    fn(batch.index, batch.frames)


def name_of(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__name__", None) or type(fn).__name__


def check_target(target: float) -> float:
    """``target`` as a float in (0, 1), or a ValueError that says what to give."""
    if isinstance(target, bool) or not isinstance(target, int | float) or not 0 < target < 1:
        raise ValueError(
            f"reuse_target must be a number in (0, 1), the share of frames whose answer must "
            f"agree with the function's own, got {target!r}; try 0.95"
        )
    return float(target)
