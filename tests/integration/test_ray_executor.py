"""The Ray executor on a real local cluster of two nodes: same output as a local run.

One cluster serves the whole module (starting one takes seconds). Stage functions are
sent by value (cloudpickle), since Ray workers cannot import test modules.
"""

from __future__ import annotations

import mmap
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes import FrameSpec, Pipeline, Sink, StageError
from hyperframes.chunked import run_chunked
from hyperframes.io.video import VideoSource

ray = pytest.importorskip("ray")
cluster_utils = pytest.importorskip("ray.cluster_utils")

pytestmark = pytest.mark.ray


class Rows(Sink):
    def __init__(self, key: str | None = None) -> None:
        self.key, self.ids, self.values = key, [], []

    def write(self, frames, index, meta):
        self.ids += index.tolist()
        if self.key:
            self.values += list(meta[self.key])


def invert_in_place(frames):
    np.bitwise_not(frames, out=frames)
    return frames


def half_size_float(frames):
    return frames[:, ::2, ::2].astype(np.float32) / 255


def mean_per_frame(frames):
    return [float(f.mean()) for f in frames]


def in_shared_memory(frames):
    """Per frame: does the actor see the pool's own shared memory (not a copy)?"""
    base = frames
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    return [isinstance(base, mmap.mmap)] * len(frames)


def node_per_frame(frames):
    return [ray.get_runtime_context().get_node_id()] * len(frames)


def temporal_max(windows):
    return windows.max(axis=1)


def render(i):
    return np.full((6, 8, 3), i % 256, np.uint8)


def fail_at_frame_20(frames):
    if (frames[:, 0, 0, 0] == 20).any():
        raise ValueError("frame 20 is bad")
    return frames


def windowed_then_inverted(pipeline):
    return pipeline.map(temporal_max, window=(2, 1), workers=2).map(invert_in_place)


@pytest.fixture(scope="module")
def cluster(ray_cluster):
    """The session's two-node cluster, with this module's functions sent by value."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    yield ray_cluster
    cloudpickle.unregister_pickle_by_value(sys.modules[__name__])


@pytest.fixture(params=[True, False], ids=["shared-memory", "object-store"])
def executor(cluster, request):
    from hyperframes.executors.ray import RayExecutor

    made = RayExecutor(shared_memory=request.param)
    yield made
    made.close()
    assert not [n for n in made.blocks.created if Path("/dev/shm", n).exists()]


def frames_of(n=40):
    frames = np.random.default_rng(n).integers(0, 256, (n, 6, 8, 3), dtype=np.uint8)
    frames[:, 0, 0, 0] = np.arange(n)
    return frames


def test_map_in_place(executor):
    frames = frames_of()
    out = (
        Pipeline.from_frames(frames, batch_size=8)
        .map(invert_in_place, workers=2)
        .collect(executor=executor)
    )
    np.testing.assert_array_equal(out, 255 - frames)


def test_map_changing_shape_windows_and_values(cluster):
    frames = frames_of(37)
    local = (
        Pipeline.from_frames(frames, batch_size=8)
        .map(temporal_max, window=(2, 1), workers=2)
        .map(half_size_float)
    )
    from hyperframes.executors.ray import RayExecutor

    np.testing.assert_array_equal(local.collect(executor=RayExecutor()), local.collect())
    sink = Rows("mean")
    Pipeline.from_frames(frames, batch_size=8).map(mean_per_frame, into="mean", workers=2).to(
        sink
    ).run(executor=RayExecutor())
    assert sink.values == [float(f.mean()) for f in frames]


def test_actors_on_the_drivers_host_work_in_shared_memory(executor):
    sink = Rows("shared")
    report = (
        Pipeline.from_frames(frames_of(16), batch_size=4)
        .map(in_shared_memory, into="shared", workers=2)
        .to(sink)
        .run(executor=executor)
    )
    assert sink.values == [executor.shared_memory] * 16
    assert bool(executor.blocks.created) == executor.shared_memory
    went = report.extra["executor"]  # the report says where the batches went
    if executor.shared_memory:
        assert went["calls on shared memory"] == 4 and "why copied" not in went
    else:
        assert went["calls through the object store"] == 4
        assert went["why copied"] == "shared_memory=False"


def test_render_runs_on_both_nodes(executor):
    out = Pipeline.from_generator(
        render, count=50, spec=FrameSpec((6, 8, 3)), workers=2, batch_size=16
    ).collect(executor=executor)
    np.testing.assert_array_equal(out, np.stack([render(i) for i in range(50)]))
    sink = Rows("node")
    Pipeline.from_frames(frames_of(64), batch_size=4).map(
        node_per_frame, into="node", workers=2
    ).to(sink).run(executor=executor)
    assert len(set(sink.values)) == 2, "the two actors should be spread over both nodes"


def test_stage_error_keeps_its_type(executor):
    pipeline = Pipeline.from_frames(frames_of(), batch_size=8).map(fail_at_frame_20)
    with pytest.raises(ValueError, match="frame 20 is bad") as info:
        pipeline.run(executor=executor)
    assert "traceback in a Ray actor" in "\n".join(info.value.__notes__)


def test_a_killed_actor_fails_the_run(executor):
    run = executor.remote(invert_in_place, stage="map:invert", workers=1)
    frames = frames_of(4)
    run(frames)
    for actor in executor._actors:
        ray.kill(actor)
    deadline = time.monotonic() + 60
    with pytest.raises(StageError, match=r"map:invert.*actor died"):
        while time.monotonic() < deadline:  # ray.kill is asynchronous: a call may still land
            run(frames)
    executor.close()


def write_video(path: Path, n: int, *, gop: int) -> Path:
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.options = {"g": str(gop), "keyint_min": str(gop), "sc_threshold": "0"}
        y, x = np.mgrid[0:48, 0:64]
        for i in range(n):
            frame = np.stack([(x * 4 + i * 7) % 256, (y * 5 + i * 3) % 256, (x + y + i) % 256])
            video_frame = av.VideoFrame.from_ndarray(
                frame.transpose(1, 2, 0).astype(np.uint8), format="rgb24"
            )
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


def test_chunked_output_equals_a_local_run_and_resumes(executor, tmp_path):
    source = write_video(tmp_path / "in.mp4", 130, gop=20)
    expected = windowed_then_inverted(Pipeline.from_source(VideoSource(source))).collect()
    output = tmp_path / "out.mkv"
    work = tmp_path / "segments"
    options = {"codec": "ffv1", "segments": 4, "work_dir": work, "keep_segments": True}
    report = run_chunked(source, output, windowed_then_inverted, executor=executor, **options)
    chunks = report.extra["chunks"]
    assert report.frames == 130
    assert (chunks["segments"], chunks["reused"], chunks["halo"]) == (4, 0, [2, 1])
    got = Pipeline.from_source(VideoSource(output)).collect()
    np.testing.assert_array_equal(got, expected)

    parts = sorted(work.glob("segment-*.mkv"))
    parts[1].unlink()
    output.unlink()  # as a run killed before its join leaves it
    again = run_chunked(source, output, windowed_then_inverted, executor=executor, **options)
    assert (again.extra["chunks"]["segments"], again.extra["chunks"]["reused"]) == (4, 3)
    assert again.frames == 20 and again.extra["chunks"]["reused_frames"] == 110  # made, kept
    assert again.stages[0].frames == 20 + 3  # only segment 1 (frames 40-59) and its halo
    np.testing.assert_array_equal(Pipeline.from_source(VideoSource(output)).collect(), expected)
    fresh = run_chunked(  # overwrite reuses nothing an earlier run kept
        source, output, windowed_then_inverted, executor=executor, overwrite=True, **options
    )
    assert (fresh.extra["chunks"]["reused"], fresh.frames) == (0, 130)


def test_a_full_dev_shm_falls_back_to_the_object_store(cluster, monkeypatch):
    from hyperframes.executors import _shm
    from hyperframes.executors.ray import RayExecutor

    def full(size: int) -> None:
        raise _shm.SharedMemoryFull(f"{size} bytes do not fit")

    monkeypatch.setattr(_shm, "_check_room", full)
    executor = RayExecutor()
    sink = Rows("shared")
    frames = frames_of(16)
    report = (
        Pipeline.from_frames(frames, batch_size=4)
        .map(invert_in_place)
        .map(in_shared_memory, into="shared", workers=2)
        .to(sink)
        .run(executor=executor)
    )
    assert sink.values == [False] * 16 and executor.blocks.created == []
    assert "/dev/shm could not hold a pool" in report.extra["executor"]["why copied"]
