"""Windows, stateful stages, verified reuse and faults, each against a plain loop."""

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hyperframes import FramesFailed, Pipeline, Sink
from hyperframes.modes import Retry, ReuseByHyperframe

pytestmark = pytest.mark.usefixtures("no_thread_leak")


class Rows(Sink):
    def __init__(self, key=None):
        self.key, self.ids, self.values, self.frames = key, [], [], []

    def write(self, frames, index, meta):
        self.ids += index.tolist()
        self.frames.append(frames.copy())
        if self.key:
            self.values += list(meta[self.key])


def numbered(n, shape=(3, 4)):
    """Frame i is filled with i (as uint16), so results can be checked by value."""
    return np.broadcast_to(np.arange(n, dtype=np.uint16).reshape(n, 1, 1), (n, *shape)).copy()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    n=st.integers(1, 120),
    batch_exp=st.integers(0, 5),
    before=st.integers(0, 4),
    after=st.integers(0, 40),
    workers=st.integers(1, 3),
)
def test_window_equals_a_plain_loop_with_clamped_edges(n, batch_exp, before, after, workers):
    if before + after == 0:
        after = 1
    frames = numbered(n)

    def window_sum(windows):
        return [int(w[:, 0, 0].astype(np.int64).sum()) for w in windows]

    sink = Rows("wsum")
    Pipeline.from_frames(frames, batch_size=1 << batch_exp).map(
        window_sum, window=(before, after), workers=workers, into="wsum"
    ).to(sink).run()
    expected = [
        sum(min(max(k, 0), n - 1) for k in range(i - before, i + after + 1)) for i in range(n)
    ]
    assert sink.ids == list(range(n))
    assert [int(v) for v in sink.values] == expected


def test_windowed_stage_returns_frames():
    frames = numbered(50)

    def temporal_mean(windows):
        return windows.mean(axis=1).astype(np.uint16)

    out = (
        Pipeline.from_frames(frames, batch_size=8)
        .map(temporal_mean, window=(1, 1), workers=2)
        .collect()
    )
    padded = np.concatenate([frames[:1], frames, frames[-1:]]).astype(np.float64)
    expected = ((padded[:-2] + padded[1:-1] + padded[2:]) / 3).astype(np.uint16)
    np.testing.assert_array_equal(out, expected)


def test_stateful_stage_sees_frames_in_order():
    seen = []
    lock = threading.Lock()

    def running_total():
        total = 0

        def step(frames):
            nonlocal total
            out = []
            for f in frames:
                total += int(f[0, 0])
                out.append(total)
            with lock:
                seen.append(int(frames[0, 0, 0]))
            return out

        return step

    sink = Rows("total")
    Pipeline.from_frames(numbered(300), batch_size=4).map(lambda b: b, workers=3).map(
        running_total(), stateful=True, into="total"
    ).to(sink).run()
    assert seen == sorted(seen)
    assert [int(v) for v in sink.values] == list(np.cumsum(np.arange(300)))


def test_stateful_needs_one_worker():
    with pytest.raises(ValueError, match="one worker"):
        Pipeline.from_frames(numbered(4)).map(lambda b: b, stateful=True, workers=2)


def scenes(lengths, noise, seed=0, shape=(16, 16, 3)):
    """Scenes of near-static frames; pixel (0,0,0) holds the scene number."""
    rng = np.random.default_rng(seed)
    parts = []
    for k, n in enumerate(lengths):
        base = rng.integers(20, 236, shape)
        part = np.clip(base + rng.integers(-noise, noise + 1, (n, *shape)), 0, 255)
        part[:, 0, 0, 0] = k
        parts.append(part.astype(np.uint8))
    return np.concatenate(parts)


@pytest.mark.parametrize("batch_size", [1, 4, 32])
def test_reuse_runs_once_per_hyperframe_and_never_crosses_a_boundary(batch_size):
    frames = scenes([40, 25, 60, 10], noise=1)
    calls = []

    def scene_of(batch):
        calls.append(len(batch))
        return [int(f[0, 0, 0]) for f in batch]

    sink = Rows("scene")
    report = (
        Pipeline.from_frames(frames, batch_size=batch_size)
        .group(threshold=1e-3, min_len=2, max_len=60)
        .map(scene_of, reuse=ReuseByHyperframe(psnr=30), into="scene")
        .to(sink)
        .run()
    )
    assert sink.values == [int(f[0, 0, 0]) for f in frames]  # every frame its own scene
    figures = report.extra["map:scene_of"]
    assert figures["computed"] + figures["reused"] == len(frames)
    assert sum(calls) == figures["computed"] <= report.extra["group"]["hyperframes"] + 2
    assert figures["reused"] >= 120


def test_reuse_bound_is_verified_per_frame():
    frames = scenes([50], noise=1)
    frames[30:] = np.clip(frames[30:].astype(int) + 12, 0, 255)  # drift inside one group
    sink = Rows()
    report = (
        Pipeline.from_frames(frames, batch_size=16)
        .group(threshold=0.05, min_len=1, max_len=60)
        .map(lambda b: b // 2, reuse=ReuseByHyperframe(psnr=35, verify_every=5))
        .to(sink)
        .run()
    )
    figures = report.extra["map:<lambda>"]
    assert report.extra["group"]["hyperframes"] == 1
    # frame 30 is outside the bound of base 0: it is computed and becomes the next base
    assert 2 <= figures["computed"] <= 15
    assert figures["verified"] >= 3 and figures["verify_psnr_min"] >= 35
    out = np.concatenate(sink.frames).astype(float)
    exact = (frames // 2).astype(float)
    worst = max(((o - e) ** 2).mean() for o, e in zip(out, exact, strict=True)) / 255**2
    assert worst <= 10 ** (-3.5)


def test_reuse_without_group_is_explained():
    with pytest.raises(Exception, match=r"add \.group\(\)"):
        Pipeline.from_frames(numbered(8)).map(lambda b: b, reuse=ReuseByHyperframe()).run()


def test_one_percent_failures_every_frame_accounted_for_once_in_order():
    n = 3000
    rng = np.random.default_rng(7)
    bad = set(rng.choice(n, n // 100, replace=False).tolist())
    transient = set(list(bad)[::2])  # these fail only the first time
    tried = set()
    lock = threading.Lock()

    def flaky(frames):
        for f in frames:
            i = int(f[0, 0])
            with lock:
                first = i not in tried
                tried.add(i)
            if i in bad and (i not in transient or first):
                raise RuntimeError(f"frame {i} failed")
        return frames * 2

    sink = Rows()
    report = (
        Pipeline.from_frames(numbered(n), batch_size=32)
        .map(flaky, workers=2, faults=Retry(1, backoff=0))
        .to(sink)
        .run(allow_failures=n)
    )
    dead = [f["frame"] for f in report.failures]
    assert sorted(sink.ids + dead) == list(range(n))
    assert len(set(sink.ids)) == len(sink.ids) and sink.ids == sorted(sink.ids)
    assert set(dead) <= bad - transient
    out = np.concatenate(sink.frames)
    np.testing.assert_array_equal(out[:, 0, 0], 2 * np.array(sink.ids, dtype=np.uint16))


def test_a_windowed_frame_that_fails_alone_leaves_its_neighbours_windows_right():
    """Per-frame fallback in a windowed stage: each frame alone gets its own share of the
    batch's halo and neighbours."""
    n, before, after = 40, 2, 1

    def window_sum(windows):
        centre = windows[:, before, 0, 0]
        if (centre % 7 == 3).any():
            raise ValueError("no frame 3 mod 7")
        return [int(w[:, 0, 0].astype(np.int64).sum()) for w in windows]

    sink = Rows("wsum")
    report = (
        Pipeline.from_frames(numbered(n), batch_size=8)
        .map(window_sum, window=(before, after), workers=2, into="wsum", faults=Retry(1, 0))
        .to(sink)
        .run(allow_failures=n)
    )
    assert sorted(f["frame"] for f in report.failures) == [i for i in range(n) if i % 7 == 3]
    assert sink.ids == [i for i in range(n) if i % 7 != 3]
    expected = [
        sum(min(max(k, 0), n - 1) for k in range(i - before, i + after + 1)) for i in sink.ids
    ]
    assert [int(v) for v in sink.values] == expected


def test_too_many_failures_stop_the_run():
    def broken(frames):
        if (frames[:, 0, 0] % 10 == 3).any():
            raise ValueError("no threes")
        return frames

    with pytest.raises(FramesFailed, match="allow_failures=2"):
        Pipeline.from_frames(numbered(200), batch_size=8).map(broken).run(allow_failures=2)


def test_without_allow_failures_the_stage_error_is_raised_after_retries():
    attempts = []

    def always(frames):
        attempts.append(1)
        raise KeyError("nope")

    with pytest.raises(KeyError):
        Pipeline.from_frames(numbered(8), batch_size=8).map(
            always, faults=Retry(2, backoff=0)
        ).run()
    assert len(attempts) == 3


def test_retry_sees_the_original_input_after_a_half_written_failure():
    failed = []

    def half_write_then_fail(frames):
        frames += 1
        if not failed:
            failed.append(1)
            raise RuntimeError("transient")
        return frames

    out = (
        Pipeline.from_frames(numbered(8), batch_size=8)
        .map(half_write_then_fail, faults=Retry(1, backoff=0))
        .collect()
    )
    np.testing.assert_array_equal(out, numbered(8) + 1)


def test_same_output_for_any_workers_and_batch_size():
    frames = scenes([30, 5, 70, 20], noise=2, seed=3)
    results = []
    for batch_size, workers in [(1, 1), (8, 3), (64, 2)]:
        out = (
            Pipeline.from_frames(frames, batch_size=batch_size)
            .group()
            .map(lambda b: b // 3, reuse=ReuseByHyperframe(psnr=38))
            .map(lambda w: w.max(axis=1), window=(2, 1), workers=workers)
            .collect()
        )
        results.append(out)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])


def test_reuse_with_workers_splits_the_computed_frames_and_keeps_results():
    frames = scenes([20, 20, 20], noise=40, seed=5)  # noisy: most frames are computed
    threads = set()
    lock = threading.Lock()
    together = threading.Barrier(2, timeout=20)  # the first two chunks must run at once
    calls = []

    def scene_of(batch):
        with lock:
            threads.add(threading.current_thread().name)
            calls.append(1)
            first_two = len(calls) <= 2
        if first_two:
            together.wait()
        return [int(f[0, 0, 0]) for f in batch]

    sink = Rows("scene")
    report = (
        Pipeline.from_frames(frames, batch_size=16)
        .group(threshold=0.5, min_len=1, max_len=60)
        .map(scene_of, reuse=ReuseByHyperframe(psnr=60), workers=2, into="scene")
        .to(sink)
        .run()
    )
    assert sink.values == [int(f[0, 0, 0]) for f in frames]
    assert report.extra["map:scene_of"]["computed"] == len(frames)
    assert len(threads) == 2
