"""The stages the :class:`~hyperframes.pipeline.Pipeline` builder adds: a map (with its
window, its reuse strategy, its retries), and a generator's drawing call.

:func:`map_stages` checks how ``Pipeline.map``'s options combine and turns them into the
stage (and the halo stage a window needs in front of it); :func:`render_stage` is
``Pipeline.from_generator``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from .engine.faults import Retry
from .engine.stage import Call, Decided, Stage, Streamed, on_frames
from .engine.window import HaloStream, WindowCall, check_window, halo_footprint
from .frames import Batch, FrameSpec
from .hyper.reuse.agree import agreement
from .hyper.reuse.by_hyperframe import ReuseStrategy
from .hyper.reuse.target import TargetReuse
from .hyper.reuse.tuning import TUNING
from .io.arrays import check_frame
from .io.base import Footprint
from .modes import Reuse, ReuseByHyperframe, ReuseTarget

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
    reuse: Reuse | None,
    faults: Retry | None,
) -> list[Stage]:
    """The stages of ``Pipeline.map(fn, ...)`` called ``label`` (see its arguments).

    Raises:
        ValueError: options that do not combine, or a bad value.
    """
    if reuse is not None and not isinstance(reuse, ReuseByHyperframe | ReuseTarget):
        raise TypeError(
            f"reuse must be a ReuseByHyperframe or a ReuseTarget, got {type(reuse).__name__}"
        )
    if faults is not None and not isinstance(faults, Retry):
        raise TypeError(f"faults must be a Retry, got {type(faults).__name__}")
    if reuse is not None and window is not None:
        raise ValueError(
            f"reuse={type(reuse).__name__}(...) chooses the frames to compute; it does not "
            "combine with window= (use one per stage)"
        )
    compare = agreement(reuse.agree if reuse is not None else None, frames=into is None)
    stages: list[Stage] = []
    call: Call = on_frames
    if window is not None:
        before, after = check_window(window)
        halo = Streamed(lambda size: HaloStream(before, after), halo_footprint(before, after))
        stages.append(Stage(f"{label}:halo", kind=halo))
        call = WindowCall(before, after)
    kind: Decided | None = None
    if isinstance(reuse, ReuseByHyperframe):
        split, workers = workers, 1  # one thread keeps order; `split` compute at once
        plain = partial(
            ReuseStrategy,
            reuse.bound,
            verify_every=reuse.verify_every,
            stage=label,
            split=split,
            frames_out=into is None,
            agree=compare,
        )
        kind = Decided(plain, split, Footprint(label, scratch_batches=split))  # its rows
    elif isinstance(reuse, ReuseTarget):
        split, workers = workers, 1
        targeted = partial(
            TargetReuse, reuse.target, compare, stage=label, split=split, frames_out=into is None
        )
        held = TUNING.held(split)
        kind = Decided(targeted, split, Footprint(label, held_batches=held, scratch_batches=split))

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
            faults=faults if faults is not None and faults.retries else None,
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
