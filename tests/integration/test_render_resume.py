"""A long local render that is interrupted continues with ``render --resume`` (issue 28).

A local render of 2,000 frames or more is made in segments of 1,000, one after another,
kept in ``.OUT.segments/`` until the join. Interrupted after its first segment (SIGINT,
or SIGKILL, which leaves a half-written segment behind), the command says what it kept;
a rerun without ``--resume`` refuses to throw that away, one with ``--resume`` makes only
the missing segments, and the output is frame for frame the one an uninterrupted render
makes. Shorter renders write the output directly, as before.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes import FrameSpec, Pipeline
from hyperframes.chunked import local_segments, render_chunked

PAINTER = """
import time
import numpy as np

def frame(i):
    time.sleep(0.002)  # slow enough to be interrupted
    a = np.zeros((48, 64, 3), np.uint8)
    a[..., 0] = i % 256
    a[..., 2] = i // 256
    a[(i // 8) % 48, :, 1] = 255
    return a
"""
FRAMES = 3000


def painted(i: int) -> np.ndarray:
    a = np.zeros((48, 64, 3), np.uint8)
    a[..., 0], a[..., 2] = i % 256, i // 256
    a[(i // 8) % 48, :, 1] = 255
    return a


def render(tmp_path: Path, *more: str) -> subprocess.Popen[str]:
    (tmp_path / "painter.py").write_text(PAINTER)
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "-m", "hyperframes", "render", "painter:frame", "out.mkv",
               "--frames", str(FRAMES), "--size", "64x48", "--codec", "ffv1", "--json",
               *more]  # fmt: skip
    return subprocess.Popen(command, cwd=tmp_path, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip


def interrupt_after_first_segment(tmp_path: Path, signum: int) -> str:
    proc = render(tmp_path)
    record = tmp_path / ".out.mkv.segments" / "segment-00000.mkv.json"
    deadline = time.monotonic() + 120
    while not record.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, "the render ended before it could be interrupted"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == (-9 if signum == signal.SIGKILL else 128 + signum), err
    return err.strip()


def frames_of(path: Path) -> list[np.ndarray]:
    with av.open(str(path)) as container:
        return [f.to_ndarray(format="rgb24") for f in container.decode(video=0)]


@pytest.mark.parametrize(
    "signum", [signal.SIGINT, pytest.param(signal.SIGKILL, marks=pytest.mark.slow)]
)
def test_interrupted_render_resumes(tmp_path, signum):
    said = interrupt_after_first_segment(tmp_path, signum)
    assert not (tmp_path / "out.mkv").exists()
    if signum == signal.SIGINT:
        assert said.startswith("hyperframes: interrupted (SIGINT)"), said
        assert said.endswith("rerun with --resume to continue"), said
        assert "segments kept in" in said and len(said.splitlines()) == 1

    again = render(tmp_path)  # no --resume: refuses to start over silently
    _, err = again.communicate(timeout=60)
    assert again.returncode == 1
    assert "pass --resume to continue it" in err, err

    resumed = render(tmp_path, "--resume")
    out, err = resumed.communicate(timeout=120)
    assert resumed.returncode == 0, err
    report = json.loads(out)
    chunks = report["extra"]["chunks"]
    assert chunks["reused"] >= 1 and chunks["segments"] == 3
    assert report["frames"] == FRAMES - chunks["reused_frames"]  # made by this run
    assert not (tmp_path / ".out.mkv.segments").exists()  # removed after the join
    frames = frames_of(tmp_path / "out.mkv")
    assert len(frames) == FRAMES
    for i in (0, 999, 1000, 1001, 1999, 2000, 2999):
        np.testing.assert_array_equal(frames[i], painted(i))


@pytest.mark.slow  # a render killed before its first segment: 5 s
def test_resume_with_nothing_kept_renders_from_the_start(tmp_path):
    proc = render(tmp_path, "--resume")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["extra"]["chunks"]["reused"] == 0
    assert len(frames_of(tmp_path / "out.mkv")) == FRAMES


def test_local_segments_match_one_pipeline(tmp_path):
    """The library call: segments made here, in order, equal one pipeline's frames, and the
    frame ids a segment's function sees are the render's own numbers."""
    seen: list[int] = []

    def frame(i: int) -> np.ndarray:
        seen.append(i)
        return painted(i)

    report = render_chunked(
        frame, tmp_path / "seg.mkv", count=90, size=(64, 48), codec="ffv1",
        executor="threads", workers=1, segments=3,
    )  # fmt: skip
    assert report.extra["chunks"]["segments"] == 3
    assert sorted(seen) == list(range(90))
    whole = tmp_path / "whole.mkv"
    from hyperframes.io.video_sink import VideoSink

    spec = FrameSpec((48, 64, 3))
    Pipeline.from_generator(painted, count=90, spec=spec).to(VideoSink(whole, codec="ffv1")).run()
    for a, b in zip(frames_of(tmp_path / "seg.mkv"), frames_of(whole), strict=True):
        np.testing.assert_array_equal(a, b)


def test_segments_of_a_local_run():
    assert local_segments(1_999) == 1
    assert local_segments(2_000) == 2
    assert local_segments(10_000_000) == 200


def test_a_failing_segment_says_what_is_kept(tmp_path):
    """A render whose function fails in the second segment keeps the first and says so."""
    (tmp_path / "breaks.py").write_text(
        PAINTER + "\n_frame = frame\n\ndef frame(i):\n"
        "    if i == 1500:\n        raise ValueError('frame 1500 is cursed')\n"
        "    return _frame(i)\n"
    )
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "-m", "hyperframes", "render", "breaks:frame", "out.mkv",
               "--frames", str(FRAMES), "--size", "64x48", "--codec", "ffv1"]  # fmt: skip
    got = subprocess.run(command, cwd=tmp_path, env=env, text=True, capture_output=True)
    assert got.returncode == 1
    line = got.stderr.strip()
    assert len(line.splitlines()) == 1, line
    assert "frame 1500 is cursed" in line
    assert "1 of 3 segments kept in" in line and "rerun with --resume to continue" in line
    assert not (tmp_path / "out.mkv").exists()


@pytest.mark.slow  # two chunked renders: 7 s
def test_resume_refuses_segments_of_another_job(tmp_path):
    """Segments kept by a render of another function are not resumed into this one: the
    rerun with --resume says so and keeps them; without --resume it starts over."""
    interrupt_after_first_segment(tmp_path, signal.SIGINT)
    (tmp_path / "painter.py").write_text(PAINTER.replace("i % 256", "(i + 1) % 256"))
    env = os.environ | {"PYTHONPATH": str(tmp_path)}
    command = [sys.executable, "-m", "hyperframes", "render", "painter:frame", "out.mkv",
               "--frames", str(FRAMES), "--size", "64x48", "--codec", "ffv1"]  # fmt: skip
    got = subprocess.run([*command, "--resume"], cwd=tmp_path, env=env, text=True,
                         capture_output=True)  # fmt: skip
    assert got.returncode == 1
    assert "were made by another job (changed since: the render's code)" in got.stderr
    assert "rerun without --resume to start over" in got.stderr, got.stderr
    assert (tmp_path / ".out.mkv.segments" / "segment-00000.mkv.json").exists()
    fresh = subprocess.run(command, cwd=tmp_path, env=env, text=True, capture_output=True)
    assert fresh.returncode == 0, fresh.stderr
    first = frames_of(tmp_path / "out.mkv")[0]
    assert first[0, 0, 0] == 1  # the new function's frame 0
