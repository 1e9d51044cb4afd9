import itertools
import sys
import threading

import numpy as np
import pytest

import hyperframes as hf
from hyperframes.engine.watch import PoolSnapshot, RunSnapshot, StageSnapshot
from hyperframes.metrics.timeline import (
    PLOTS,
    Sample,
    StageSample,
    Timeline,
    queue_depths,
    require_plotting,
    thin,
    utilisation,
)


def sample(t, busy, depth=0, workers=2):
    stages = {
        "source": StageSample(busy / 2, 1, 0, 0),
        "map:f": StageSample(busy, workers, depth, 5),
    }
    return Sample(
        t=t, frames=int(t * 10), stages=stages, pools_in_use={"source": 3}, reorder_depth=1
    )


def fake_snapshot(timeline):
    """A run whose clock moves one sampling interval per snapshot (as the thread would)."""
    clock = [0.0]

    def snap():
        clock[0] += timeline.interval_s
        t = clock[0]
        return RunSnapshot(
            elapsed_s=t,
            frames=int(t),
            total=None,
            batch_size=4,
            stages=(
                StageSnapshot(
                    "map:f",
                    1,
                    int(t),
                    int(t),
                    t * 0.5,
                    0.0,
                    0.0,
                    queue_depth=int(t) % 3,
                    queue_capacity=3,
                ),
            ),
            pools=(PoolSnapshot("source", slots=4, in_use=1, high_water=2, slot_bytes=64),),
        )

    return snap


def test_a_sample_is_read_from_a_typed_snapshot():
    snap = RunSnapshot(
        elapsed_s=2.5,
        frames=16,
        total=32,
        batch_size=4,
        stages=(
            StageSnapshot("source", 1, 20, 5, 0.4, 0.0, 0.1),
            StageSnapshot("map:f", 3, 18, 5, 1.5, 0.1, 0.2, queue_depth=2, queue_capacity=7),
        ),
        pools=(PoolSnapshot("source", slots=9, in_use=5, high_water=8, slot_bytes=64),),
        reorder_depth=3,
    )
    got = Sample.of(snap)
    assert (got.t, got.frames, got.reorder_depth) == (2.5, 16, 3)
    assert got.stages == {
        "source": StageSample(0.4, 1, 0, 0),
        "map:f": StageSample(1.5, 3, 2, 7),
    }
    assert got.pools_in_use == {"source": 5}


def test_utilisation_is_busy_share_of_workers_between_samples():
    series = utilisation([sample(0.0, 0.0), sample(1.0, 1.0), sample(2.0, 6.0)])
    assert series["map:f"] == [(1.0, 0.5), (2.0, 1.0)]  # 1 s of 2 workers; clipped at 1
    assert series["source"] == [(1.0, 0.5), (2.0, 1.0)]


def test_queue_depths_skip_stages_without_a_queue():
    depths = queue_depths([sample(0.0, 0.0, depth=2), sample(1.0, 1.0, depth=4)])
    assert depths["map:f"] == [(0.0, 2), (1.0, 4)]
    assert "source" not in depths
    assert depths["reorder buffer"] == [(0.0, 1), (1.0, 1)]


def test_thin_keeps_even_spacing():
    assert [s.t for s in thin([sample(float(t), 0.0) for t in range(7)])] == [0, 2, 4, 6]


def test_memory_stays_bounded_at_any_length():
    timeline = Timeline(interval_s=0.5, max_samples=8)
    timeline._snapshot = fake_snapshot(timeline)
    for _ in range(1000):
        timeline._take()
    held = timeline.samples
    assert len(held) < 8
    assert timeline.interval_s > 0.5
    steps = {b.t - a.t for a, b in itertools.pairwise(held)}
    assert len(steps) == 1  # still evenly spaced
    assert held[0].t == 0.5  # the start of the run is kept


@pytest.mark.parametrize("bad", [{"interval_s": 0}, {"max_samples": 2}])
def test_bad_options(bad):
    with pytest.raises(ValueError):
        Timeline(**bad)


class CountingTimeline(Timeline):
    """Sets ``enough`` once it holds three samples."""

    def __init__(self, **options):
        super().__init__(**options)
        self.enough = threading.Event()

    def _take(self):
        super()._take()
        if len(self.samples) >= 3:
            self.enough.set()


def test_samples_a_real_run_and_joins_its_thread(no_thread_leak, tmp_path):
    pytest.importorskip("matplotlib")
    timeline = CountingTimeline(interval_s=0.001)

    def hold(frames):
        timeline.enough.wait(10)  # the run waits until the sampler took samples on its own
        return frames

    frames = np.zeros((48, 8, 8, 3), np.uint8)
    report = (
        hf.Pipeline.from_frames(frames, batch_size=8).map(hold, workers=2).run(monitor=timeline)
    )
    assert report.frames == 48
    held = timeline.samples
    assert len(held) >= 4
    assert held[-1].frames == 48
    assert "hf-timeline" not in [t.name for t in threading.enumerate()]
    written = timeline.write_plots(tmp_path / "plots")
    assert [p.name for p in written] == list(PLOTS)
    assert all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in written)


def test_missing_matplotlib_says_how_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ImportError, match=r"pip install 'hyperframes-engine\[plot\]'"):
        require_plotting()
