import signal
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperframes import FrameError, FrameSpec, Pipeline, PoolExhausted, StageError
from hyperframes.engine.plan import Footprint, plan_run
from hyperframes.engine.runner import Runner
from hyperframes.frames import check_pool_memory
from hyperframes.io.callbacks import CollectSink

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def frames_of(n, shape=(6, 5, 3), seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n, *shape), dtype=np.uint8)


def run_with_runner(pipeline, **kw):
    """Run through the Runner directly to check its pools for leaks afterwards."""
    runner = Runner(
        pipeline.source,
        pipeline.stages,
        pipeline.sink,
        batch_size=pipeline.batch_size,
        slots=kw.get("slots"),
        slot_timeout=kw.get("slot_timeout", 30),
        progress=None,
    )
    try:
        return runner.run(), runner
    finally:
        runner_leaks = runner.leaks()
        assert all(v == 0 for v in runner_leaks.values()), runner_leaks


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(0, 300),
    batch_exp=st.integers(0, 6),
    workers=st.integers(1, 3),
    reshape=st.booleans(),
    slots=st.one_of(st.none(), st.integers(1, 6)),
)
def test_pipeline_equals_a_plain_loop(n, batch_exp, workers, reshape, slots):
    frames = frames_of(n)

    def add_index_parity(batch):
        return batch ^ np.uint8(0x5A)

    def shrink(batch):
        return batch[:, ::2, ::2, 0].astype(np.uint16) * 3

    pipe = Pipeline.from_frames(frames, batch_size=1 << batch_exp).map(
        add_index_parity, workers=workers
    )
    expected = frames ^ np.uint8(0x5A)
    if reshape:
        pipe = pipe.map(shrink, workers=2)
        expected = shrink(expected)
    got = []
    report, _ = run_with_runner(pipe.for_each(lambda i, f: got.append((i, f.copy()))), slots=slots)
    assert [i for i, _ in got] == list(range(n))
    if n:
        np.testing.assert_array_equal(np.stack([f for _, f in got]), expected)
    assert report.frames == n
    assert all(s.frames == n for s in report.stages)


def test_iterable_source_and_partial_last_batch():
    gen = (np.full((4, 4), i % 256, np.uint8) for i in range(70))
    out = Pipeline.from_frames(gen, batch_size=32).collect()
    assert out.shape == (70, 4, 4)
    assert (out[:, 0, 0] == np.arange(70)).all()


def test_generator_renders_in_parallel_and_in_order():
    spec = FrameSpec((3, 3), np.uint16)
    out = Pipeline.from_generator(
        lambda i: np.full((3, 3), i, np.uint16), count=1000, spec=spec, workers=3, batch_size=16
    ).collect()
    assert (out[:, 1, 1] == np.arange(1000)).all()


def test_report_figures_are_consistent():
    frames = frames_of(200, (16, 16, 3))
    report = Pipeline.from_frames(frames, batch_size=16).map(np.bitwise_not, workers=2).run()
    assert report.frames == 200 and report.batch_size == 16
    assert [s.name for s in report.stages] == ["source", "map:invert", "sink"]
    assert report.pool_high_water_slots <= report.pool_slots
    assert report.pool_high_water_bytes == report.pool_high_water_slots * 16 * 16 * 16 * 3
    assert report.fps > 0 and report.wall_s > 0
    d = report.to_dict()
    assert d["slowest_stage"] in {"source", "map:invert", "sink"}
    assert "map:invert" in str(report)


class Boom(Exception):
    pass


@pytest.mark.parametrize("workers", [1, 3])
def test_stage_error_is_raised_as_itself_with_batch_and_frames(workers):
    def explode(batch):
        if batch[0, 0, 0, 0] == 99:
            raise Boom("bad frame")
        return batch

    frames = np.zeros((256, 4, 4, 3), np.uint8)
    frames[128] = 99
    pipe = Pipeline.from_frames(frames, batch_size=32).map(explode, workers=workers)
    with pytest.raises(Boom) as info:
        run_with_runner(pipe)
    notes = " ".join(getattr(info.value, "__notes__", []))
    assert "map:explode" in notes and "batch 4 (frames 128..159)" in notes


def test_sink_error_stops_the_line():
    def sink(i, frame):
        if i == 77:
            raise Boom("sink broke")

    with pytest.raises(Boom):
        run_with_runner(Pipeline.from_frames(frames_of(500), batch_size=8).for_each(sink))


def test_source_frame_of_wrong_shape_names_the_frame():
    frames = [np.zeros((4, 4), np.uint8)] * 10 + [np.zeros((5, 4), np.uint8)]
    with pytest.raises(FrameError, match=r"frame 10 .* is 4x5 uint8, expected 4x4 uint8"):
        Pipeline.from_frames(frames, batch_size=4).run()


def test_generator_frame_of_wrong_dtype_names_the_frame():
    def render(i):
        return np.zeros((2, 2), np.float32 if i == 5 else np.uint8)

    with pytest.raises(FrameError, match=r"frame 5 from render\(5\)"):
        Pipeline.from_generator(render, count=8, spec=FrameSpec((2, 2))).run()


@pytest.mark.parametrize(
    ("fn", "match"),
    [
        (lambda b: None, "returned None"),
        (lambda b: b[:-1] if len(b) > 1 else b[:0], "expected .* frames"),
        (lambda b: [1, 2], "returned list"),
        (lambda b: b.astype(np.float32) if b[0, 0, 0, 0] else b.astype(np.float64), "one shape"),
    ],
)
def test_stage_breaking_the_contract_is_reported(fn, match):
    frames = frames_of(64)
    frames[:, 0, 0, 0] = np.arange(64) % 2
    with pytest.raises(StageError, match=match):
        run_with_runner(Pipeline.from_frames(frames, batch_size=1).map(fn))


def test_declared_spec_is_enforced():
    pipe = Pipeline.from_frames(frames_of(8), batch_size=4).map(
        lambda b: b[:, :2], spec=FrameSpec((3, 5, 3), np.uint8)
    )
    with pytest.raises(StageError, match="its declared spec"):
        run_with_runner(pipe)


def test_no_deadlock_when_the_pool_fills_with_batches_finished_ahead():
    """Batch 0 is held back until later batches have filled every other slot of both pools."""
    slots = 4
    ahead_done = threading.Event()
    passed = []

    def slow_first(batch):
        if batch[0, 0, 0, 0] == 0:
            assert ahead_done.wait(20), "the later batches never filled the pool"
        return batch

    def shrink(batch):
        passed.append(int(batch[0, 0, 0, 0]))
        if len(passed) == slots - 1:
            ahead_done.set()
        return batch[:, :2, :2].copy()

    frames = np.repeat(np.arange(40, dtype=np.uint8), 1).reshape(40, 1, 1, 1)
    frames = np.broadcast_to(frames, (40, 4, 4, 3)).copy()
    pipe = Pipeline.from_frames(frames, batch_size=1).map(slow_first, workers=slots).map(shrink)
    report, _ = run_with_runner(pipe.to(CollectSink()), slots=slots)
    assert (report.output[:, 0, 0, 0] == np.arange(40)).all()
    assert report.reorder_high_water >= slots - 1


def test_slot_timeout_says_which_stage_holds_the_slots(monkeypatch):
    monkeypatch.setattr("hyperframes.engine.runner.STOP_GRACE_S", 0.2)
    release = threading.Event()

    def stuck(batch):
        release.wait(20)
        return batch

    pipe = Pipeline.from_frames(frames_of(64), batch_size=4).map(stuck, workers=2)
    try:
        with pytest.raises(PoolExhausted, match=r"map:stuck holds 2.*slot") as info:
            Pipeline.run(pipe, slots=2, slot_timeout=0.2)
        assert "left behind: hf-map:stuck" in " ".join(info.value.__notes__)
    finally:
        release.set()


def test_keyboard_interrupt_stops_cleanly():
    main = threading.main_thread().ident
    sent = threading.Event()

    def interrupt(batch):
        if batch[0, 0, 0, 0] == 10 and not sent.is_set():
            sent.set()
            signal.pthread_kill(main, signal.SIGINT)
        return batch

    frames = np.broadcast_to(
        np.arange(200, dtype=np.uint8).reshape(200, 1, 1, 1), (200, 2, 2, 1)
    ).copy()
    pipe = Pipeline.from_frames(frames, batch_size=2).map(interrupt, workers=2)
    with pytest.raises(KeyboardInterrupt):
        run_with_runner(pipe)
    assert sent.is_set()


def test_default_slots_and_memory_guard():
    assert plan_run(FrameSpec((8, 8, 3)), [Footprint("map", workers=5)], budget=1 << 30).slots == 8
    psutil = pytest.importorskip("psutil")
    physical = psutil.virtual_memory().total  # the machine's memory, read independently
    check_pool_memory(2**20, what="small")
    check_pool_memory(int(0.45 * physical), what="under half")  # allowed: under half of it
    with pytest.raises(MemoryError, match="lower batch_size") as refused:
        check_pool_memory(int(0.55 * physical), what="over half")
    assert f"more than half of this machine's {physical / 2**30:.1f} GiB" in str(refused.value)


def test_huge_frames_are_refused_before_allocating():
    pipe = Pipeline.from_generator(lambda i: None, count=10, spec=FrameSpec((100_000, 100_000, 3)))
    with pytest.raises(MemoryError, match="GiB"):
        pipe.run()


def test_bad_arguments():
    with pytest.raises(ValueError, match="power of two"):
        Pipeline.from_frames(frames_of(4), batch_size=100)
    with pytest.raises(ValueError, match="workers"):
        Pipeline.from_frames(frames_of(4)).map(np.negative, workers=0)
    with pytest.raises(TypeError):
        Pipeline.from_frames(frames_of(4)).map("not callable")
    with pytest.raises(ValueError, match="spec="):
        Pipeline.from_frames(iter([]))


class Recorder:
    def __init__(self):
        self.snapshots, self.report = [], "unset"
        self.snap = None

    def start(self, snapshot):
        self.snap = snapshot
        self.snapshots.append(snapshot())

    def stop(self, report):
        self.snapshots.append(self.snap())
        self.report = report


def test_monitor_sees_live_figures_and_the_report():
    monitor = Recorder()
    seen = []
    frames = frames_of(64)
    report = (
        Pipeline.from_frames(frames, batch_size=8)
        .map(np.bitwise_not, workers=2)
        .for_each(lambda i, f: seen.append(monitor.snap().frames) if i % 8 == 0 else None)
        .run(monitor=monitor)
    )
    assert monitor.report is report
    first, last = monitor.snapshots[0], monitor.snapshots[-1]
    assert first.frames == 0 and last.frames == 64
    assert [s.name for s in last.stages] == ["source", "map:invert", "sink"]
    assert last.pools[0].in_use == 0 and last.pools[0].slots == report.pool_slots
    assert seen == sorted(seen)


def test_monitor_is_told_of_a_failure():
    monitor = Recorder()

    def boom(b):
        raise Boom("x")

    with pytest.raises(Boom):
        Pipeline.from_frames(frames_of(8), batch_size=4).map(boom).run(monitor=monitor)
    assert monitor.report is None


def test_unknown_executor_is_named():
    with pytest.raises(ValueError, match="threads, processes, ray"):
        Pipeline.from_frames(frames_of(8)).run(executor="gpu-cluster")
