"""Stage kinds as types: what a stage is besides its function decides its run, its share of
the plan, and whether part of the input can be run alone (a chunked segment)."""

from __future__ import annotations

import numpy as np
import pytest

from hyperframes import Pipeline
from hyperframes.engine.stage import Decided, Stage, Streamed
from hyperframes.engine.stage_run import StageRun, StrategyRun, StreamRun, start_run
from hyperframes.engine.window import HaloStream, halo_footprint
from hyperframes.hyper.reuse.agree import agreement
from hyperframes.hyper.reuse.target import TargetReuse
from hyperframes.io.base import Footprint
from hyperframes.modes import ReuseTarget
from hyperframes.segments import halo_of

FRAMES = np.zeros((8, 4, 4, 3), np.uint8)


def _same(frames: np.ndarray) -> np.ndarray:
    return frames


def test_each_kind_starts_its_own_run() -> None:
    streamed = Stage("halo", kind=Streamed(lambda size: HaloStream(1, 1), halo_footprint(1, 1)))
    decided = Stage(
        "target",
        _same,
        kind=Decided(lambda: TargetReuse(0.9, agreement(None, frames=True), stage="t"), 2),
    )
    plain = Stage("plain", _same, workers=3)
    runs = [start_run(stage, batch_size=4) for stage in (streamed, decided, plain)]
    try:
        assert [type(run) for run in runs] == [StreamRun, StrategyRun, StageRun]
    finally:
        for run in runs:
            run.finish()
    assert (streamed.ordered, decided.ordered, plain.ordered) == (True, True, False)
    assert (streamed.split, decided.split, plain.split) == (1, 2, 1)


def test_only_a_streamed_stage_goes_without_a_function() -> None:
    with pytest.raises(ValueError, match="needs a function or a stream"):
        Stage("target", kind=Decided(lambda: TargetReuse(0.9, agreement(None), stage="t")))
    with pytest.raises(ValueError, match="needs a function or a stream"):
        Stage("plain")


def test_a_footprint_comes_from_the_kind_and_an_ordered_plain_stage_is_stateful() -> None:
    held = Footprint("x", held_batches=12)
    decided = Stage("target", _same, kind=Decided(lambda: None, 2, held))  # type: ignore[arg-type, return-value]
    assert decided.footprint().held_batches == 12 and decided.footprint().name == "target"
    assert not decided.footprint().stateful
    assert Stage("stateful", _same, ordered=True).footprint().stateful
    assert not Stage("plain", _same, workers=2).footprint().stateful


@pytest.mark.parametrize(
    ("build", "halo"),
    [
        (lambda p: p.map(_same, window=(2, 1)).map(_same, window=(0, 3)), (2, 4)),
        (lambda p: p.map(_same, reuse=ReuseTarget(0.9)), (0, 0)),
        (lambda p: p, (0, 0)),
    ],
)
def test_a_segments_halo_sums_its_windows(build, halo) -> None:
    assert halo_of(build, Pipeline.from_frames(FRAMES)) == halo


@pytest.mark.parametrize(
    "build",
    [lambda p: p.map(_same, stateful=True), lambda p: p.group()],
    ids=["stateful map", "grouping"],
)
def test_a_segment_refuses_stages_that_keep_state_across_frames(build) -> None:
    with pytest.raises(ValueError, match="keeps state across frames"):
        halo_of(build, Pipeline.from_frames(FRAMES))
