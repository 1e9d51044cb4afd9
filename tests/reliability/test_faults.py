"""Faults and crashes: failing stage calls, a worker killed from outside, a full disk.

kill -9 of whole commands is in ``test_kill.py``; a child that kills itself is in
``tests/unit/test_executor_processes.py``; killed and resumed packs in
``tests/integration/test_store_resume.py``.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
from collections import Counter
from pathlib import Path

import av
import numpy as np
import psutil
import pytest
import xxhash

from hyperframes import FrameSpec, Pipeline, StageError, VideoSink
from hyperframes.executors.processes import ProcessExecutor
from hyperframes.modes import Retry
from hyperframes.store import FrameStore
from shm_blocks import left_since, shm_names  # the suite's helper

# -- 1 % of stage calls fail --------------------------------------------------------------

N = 30_000
SHAPE = (4, 6, 3)


def render(i: int) -> np.ndarray:
    """Frame ``i``: its id in the first pixel, a pattern elsewhere."""
    frame = np.full(SHAPE, (i * 7) % 256, np.uint8)
    frame[0, 0] = (i & 0xFF, (i >> 8) & 0xFF, (i >> 16) & 0xFF)
    frame[1:, :, 1] = np.arange(6, dtype=np.uint8) * (i % 5)
    return frame


def ids_of(frames: np.ndarray) -> list[int]:
    px = frames[:, 0, 0].astype(np.int64)
    return (px[:, 0] | px[:, 1] << 8 | px[:, 2] << 16).tolist()


class Faults:
    """Decides, per stage call, whether it fails; thread-safe and deterministic.

    A call is keyed by its stage and the ids it holds. One key in a hundred fails the
    first one or two times it is seen (transient); a call holding a frame of ``dead``
    always fails (after half-writing its input, which a retry must not see).
    """

    def __init__(self, stage: str, dead: set[int], *, enabled: bool = True) -> None:
        self.stage, self.dead, self.enabled = stage, dead, enabled
        self.seen: Counter[tuple[int, ...]] = Counter()
        self.failed = 0
        self.calls = 0
        self._lock = threading.Lock()

    def check(self, frames: np.ndarray) -> None:
        if not self.enabled:
            return
        ids = tuple(ids_of(frames))
        with self._lock:
            attempt = self.seen[ids]
            self.seen[ids] += 1
            self.calls += 1
        key = xxhash.xxh3_64_intdigest(f"{self.stage}{ids}".encode())
        transient = key % 100 == 0 and attempt < 1 + key // 100 % 2
        if transient or self.dead.intersection(ids):
            with self._lock:
                self.failed += 1
            frames[:, 1:] ^= 0x55  # a half-write the retry must not see
            raise RuntimeError(f"{self.stage} failed on frames {ids[0]}..{ids[-1]}")


def run_faulty(faults: tuple[Faults, Faults]) -> tuple[list[int], dict[int, int], list[dict]]:
    a, b = faults

    def stage_a(frames: np.ndarray) -> np.ndarray:
        a.check(frames)
        frames[:, 1:] = frames[:, 1:] * 3 + 1  # in place
        return frames

    def stage_b(frames: np.ndarray) -> np.ndarray:
        b.check(frames)
        out = frames.copy()  # a new array
        out[:, 1:] = np.bitwise_xor(frames[:, 1:], frames[:, :1])
        return out

    delivered: list[int] = []
    sums: dict[int, int] = {}

    def sink(ids: np.ndarray, frames: np.ndarray) -> None:
        assert ids.tolist() == ids_of(frames)  # the id travelled with its pixels
        for i, frame in zip(ids.tolist(), frames, strict=True):
            delivered.append(i)
            sums[i] = xxhash.xxh3_64_intdigest(frame.tobytes())

    report = (
        Pipeline.from_generator(render, count=N, spec=FrameSpec(SHAPE), workers=2, batch_size=64)
        .map(stage_a, workers=2, faults=Retry(2, backoff=0), name="a")
        .map(stage_b, workers=2, faults=Retry(2, backoff=0), name="b")
        .for_each(sink, batched=True)
        .run(allow_failures=N)
    )
    return delivered, sums, list(report.failures)


def test_one_percent_of_stage_calls_fail_and_no_frame_is_lost_or_changed():
    rng = np.random.default_rng(11)
    dead_a = set(rng.choice(N, 20, replace=False).tolist())
    dead_b = set(rng.choice(N, 20, replace=False).tolist()) - dead_a
    faults = (Faults("a", dead_a), Faults("b", dead_b))
    delivered, sums, failures = run_faulty(faults)
    clean, clean_sums, none = run_faulty((Faults("a", set(), enabled=False),) * 2)

    # about 1 % of the calls failed, both kinds, in both stages
    for f in faults:
        assert 0.005 < f.failed / f.calls < 0.1, (f.stage, f.failed, f.calls)
    assert none == [] and clean == list(range(N))
    # every frame exactly once: delivered in order, or a dead letter; only the dead frames
    dead = {(f["stage"], f["frame"]) for f in failures}
    assert dead == {("a", i) for i in dead_a} | {("b", i) for i in dead_b}
    assert len(failures) == len(dead)
    assert delivered == sorted(delivered) and len(set(delivered)) == len(delivered)
    assert sorted(delivered + [i for _, i in dead]) == list(range(N))
    # and each delivered frame is exactly what a fault-free run makes of it
    assert all(sums[i] == clean_sums[i] for i in delivered)


# -- a worker process killed from outside -----------------------------------------------


def slow_copy(frames: np.ndarray) -> np.ndarray:
    """Importable (process workers load it by name); slow enough to be caught mid-run."""
    out = frames.copy()
    for _ in range(20):
        out = np.sqrt(out.astype(np.float32) ** 2).astype(np.uint8)
    return out


def test_a_worker_killed_from_outside_mid_run_fails_cleanly_naming_its_stage():
    """The existing test kills a child from inside its function; here the parent's
    progress callback SIGKILLs a busy worker of the second stage while batches flow."""
    executor = ProcessExecutor()
    killed: list[int] = []
    shm_before = shm_names()

    def kill_one(progress) -> None:
        if progress.frames >= 64 and not killed:
            pid = executor.pids()[-1]  # the last stage's workers start last
            killed.append(pid)
            os.kill(pid, signal.SIGKILL)

    frames = np.zeros((4096, 32, 32, 3), np.uint8)
    pipeline = (
        Pipeline.from_frames(frames, batch_size=16)
        .map(slow_copy, workers=1, name="first")
        .map(slow_copy, workers=1, name="second")
    )
    with pytest.raises(StageError, match=r"second.*signal 9"):
        pipeline.run(executor=executor, progress=kill_one)
    assert killed
    alive = {p.pid for p in psutil.Process().children(recursive=True)}
    assert not alive & set(executor.pids()), "worker processes left running"
    left = [n for n in executor.blocks.created if Path("/dev/shm", n).exists()]
    assert not left and left_since(shm_before) == set()


# -- a full disk --------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    """A 3 MiB tmpfs mounted for the test, or skip where mounting is not allowed."""
    mount = tmp_path / "disk"
    mount.mkdir()
    if shutil.which("mount") is None:
        pytest.skip("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=3m", "tmpfs", str(mount)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False)


@pytest.fixture(scope="module")
def noise_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """120 frames of 160x96 noise in FFV1 (about 6 MB: twice the small disk)."""
    path = tmp_path_factory.mktemp("noise") / "noise.mkv"
    rng = np.random.default_rng(0)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 160, 96, "bgr0"
        for i in range(120):
            frame = rng.integers(0, 256, (96, 160, 3), dtype=np.uint8)
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


def hyperframes(*argv: str) -> subprocess.CompletedProcess[str]:
    """The CLI in a subprocess (a full disk under an mmap must not touch the test process)."""
    return subprocess.run(
        [sys.executable, "-m", "hyperframes", *argv], capture_output=True, text=True, timeout=120
    )


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hyperframes: error: "), stderr
    return lines[0]


def test_pack_onto_a_full_disk_leaves_a_store_that_verifies_and_resumes(
    small_disk: Path, noise_clip: Path, tmp_path: Path
):
    store = small_disk / "s.hfs"
    done = hyperframes("pack", str(noise_clip), str(store), "--max-len", "8", "--json")
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert "no space left" in line and "--resume" in line
    with FrameStore(store) as partial:  # opens, verifies, holds a prefix
        assert not partial.complete and 0 < len(partial) < 120
        assert partial.verify() == []
        committed = len(partial)
    moved = tmp_path / "moved.hfs"  # room again: the partial store resumes elsewhere
    shutil.copytree(store, moved)
    done = hyperframes("pack", str(noise_clip), str(moved), "--max-len", "8", "--resume")
    assert done.returncode == 0, done.stderr
    with FrameStore(moved) as full:
        assert full.complete and len(full) == 120 and full.verify() == []
    assert committed < 120


def test_transcode_onto_a_full_disk_leaves_nothing(small_disk: Path, noise_clip: Path):
    out = small_disk / "out.mkv"
    done = hyperframes("transcode", str(noise_clip), str(out), "--codec", "ffv1")
    assert done.returncode == 1
    assert "No space left on device" in one_error_line(done.stderr)
    assert list(small_disk.iterdir()) == []  # neither the output nor its temp


def test_simulated_enospc_in_a_sink_removes_the_partial_video(tmp_path: Path):
    """Where no tmpfs can be mounted: the sink's write raises ENOSPC half-way."""

    class FullDisk(VideoSink):
        def write(self, frames, index, meta):
            if self.frames_written >= 32:
                raise OSError(28, "No space left on device", str(self.temp))
            super().write(frames, index, meta)

    frames = np.zeros((100, 16, 16, 3), np.uint8)
    with pytest.raises(OSError, match="No space left"):
        Pipeline.from_frames(frames, batch_size=16).to(FullDisk(tmp_path / "o.mkv")).run()
    assert list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def yuv_noise_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """60 frames of 320x192 yuv420p noise in FFV1 (about 5.5 MB of planes, which lossless
    H.264 cannot shrink: twice the small disk)."""
    path = tmp_path_factory.mktemp("noise") / "yuv.mkv"
    rng = np.random.default_rng(1)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 320, 192, "yuv420p"
        for i in range(60):
            video_frame = av.VideoFrame(320, 192, "yuv420p")
            for plane in video_frame.planes:
                view = np.frombuffer(memoryview(plane), np.uint8)
                view[...] = rng.integers(0, 256, view.shape, dtype=np.uint8)
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


def test_an_x264_pack_onto_a_full_disk_verifies_and_resumes(
    small_disk: Path, yuv_noise_clip: Path, tmp_path: Path
):
    store = small_disk / "x.hfs"
    args = ("--intra", "x264", "--gop", "4")
    done = hyperframes("pack", str(yuv_noise_clip), str(store), *args)
    assert done.returncode == 1
    assert "no space left" in one_error_line(done.stderr)
    with FrameStore(store, pix_fmt="native") as partial:
        assert not partial.complete and 0 < len(partial) < 60 and partial.verify() == []
    moved = tmp_path / "moved.hfs"
    shutil.copytree(store, moved)
    done = hyperframes("pack", str(yuv_noise_clip), str(moved), *args, "--resume")
    assert done.returncode == 0, done.stderr
    with FrameStore(moved, pix_fmt="native") as full:
        assert full.complete and len(full) == 60 and full.verify() == []
