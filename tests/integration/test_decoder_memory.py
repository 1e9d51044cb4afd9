"""A 4K file among small ones stays within the run's budget (issue 50): the decoder's own
frames are in the plan, and it decodes on the threads the budget holds. Each run in a
fresh interpreter, peak RSS (VmHWM) over a baseline taken after the imports and a first
decode, as ``test_memory_budget`` does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes.io.decoder_memory import decoder_bytes, threads_within

MIB = 1 << 20

CHILD = r"""
import json, sys
import av, cv2, pyarrow.parquet
import hyperframes as hf
from hyperframes import Pipeline, ResultsSink, VideoFiles

job = json.loads(sys.argv[1])
with av.open(job["warm"]) as c:  # the decoder's libraries in memory before the baseline
    next(c.decode(video=0)).to_ndarray(format="rgb24")
def hwm():
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = hwm()
def bright(frames):
    return frames.mean(axis=(1, 2, 3))
source = VideoFiles(job["folder"], size=job["size"] and tuple(job["size"]))
report = (Pipeline.from_source(source).map(bright, workers=2, into="b")
          .to(ResultsSink(job["out"])).run(memory=job["memory"]))
print(json.dumps({"over": hwm() - base, "frames": report.frames, "budget": report.memory_budget,
                  "pools": report.pool_bytes, "source": report.source_bytes}))
"""


def encode(path: Path, width: int, height: int, frames: int) -> Path:
    y, x = np.mgrid[0:height, 0:width].astype(np.uint8)  # (uint8 sums wrap at 256)
    rgb = np.stack([x, y, x ^ y], -1)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = width, height, "yuv420p"
        for k in range(frames):
            rgb[..., 0], rgb[..., 1] = x + np.uint8(8 * k % 256), y + np.uint8(4 * k % 256)
            frame = av.VideoFrame.from_ndarray(rgb, format="rgb24")
            out.mux(stream.encode(frame))
        out.mux(stream.encode(None))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory, clip_path) -> Path:
    here = tmp_path_factory.mktemp("mixed")
    for name in ("bikes.mp4", "carphone_pristine.mp4"):
        (here / name).symlink_to(clip_path(name))
    encode(here / "large_4k.mp4", 3840, 2160, 24)
    return here


def run_child(
    folder: Path, warm: Path, out: Path, memory: str, size: tuple[int, int] | None = (640, 360)
) -> subprocess.CompletedProcess:
    job = {"folder": str(folder), "warm": str(warm), "memory": memory, "out": str(out),
           "size": size}  # fmt: skip
    return subprocess.run([sys.executable, "-c", CHILD, json.dumps(job)], capture_output=True,
                          text=True, timeout=300)  # fmt: skip


@pytest.mark.parametrize(("size", "memory"), [((640, 360), "170MiB"), (None, "256MiB")])
def test_a_4k_file_among_small_ones_stays_within_the_budget(
    folder: Path, clip_path, tmp_path, size, memory
):
    """Read at one size, or each at its own (then the slots hold 4K frames too)."""
    done = run_child(folder, clip_path("bikes.mp4"), tmp_path / "b.parquet", memory, size)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["frames"] == 250 + 120 + 24
    # the 4K decoder is in the plan: its frames on one thread, and its RGB at 4K to resize
    resized = 3840 * 2160 * 3 if size else 0  # (at its own size: decoded into the slot)
    assert got["source"] >= decoder_bytes(3840 * 2160 * 3 // 2, 1, resized)
    assert got["pools"] + got["source"] <= got["budget"]
    # before the decoder was planned this run peaked at 194 MiB over the baseline, on
    # FFmpeg's 3 threads whatever the budget; now on the one thread the budget holds
    assert got["over"] <= 1.1 * got["budget"], f"{got['over'] / MIB:.0f} MiB over the baseline"


def test_a_budget_that_cannot_hold_the_4k_decoder_says_so(folder: Path, clip_path, tmp_path):
    done = run_child(folder, clip_path("bikes.mp4"), tmp_path / "b.parquet", "100MiB")
    assert done.returncode != 0 and not (tmp_path / "b.parquet").exists()
    last = done.stderr.strip().splitlines()[-1]
    assert "MemoryError" in last and "the decoder's" in last and "larger memory=" in last


def test_the_threads_follow_what_the_plan_gives():
    frame = 3840 * 2160 * 3 // 2
    assert threads_within(decoder_bytes(frame, 5), frame, most=17) == 5
    assert threads_within(decoder_bytes(frame, 5) - 1, frame, most=17) == 4
    assert threads_within(0, frame, most=17) == 1
    assert threads_within(1 << 40, frame, most=3) == 3


def test_sources_around_a_video_declare_its_decoder_and_pass_on_their_share(folder: Path):
    from hyperframes.io.loop import Looped, Retimed
    from hyperframes.io.video import VideoSource

    clip = folder / "large_4k.mp4"
    alone = VideoSource(clip).footprint()
    assert 100 * MIB < alone.least < alone.wants  # one thread, and FFmpeg's own count (2+)
    made: list[VideoSource] = []

    def make() -> VideoSource:
        made.append(VideoSource(clip, fps=5))
        return made[-1]

    sampled = VideoSource(clip, fps=5).footprint()  # decoders a worker, frames in flight
    assert alone.least < sampled.least < sampled.wants
    looped = Looped(make, times=2)
    assert looped.footprint() == sampled
    looped.use_memory(sampled.least)  # one worker's worth: every pass decodes on one
    with looped:
        while len(looped.read_into(np.empty((8, 2160, 3840, 3), np.uint8))):
            pass
    assert len(made) == 2 and [s._worker_cap for s in made] == [1, 1]
    assert made[0]._decoder is None or made[0]._decoder._workers == 1
    assert Retimed(VideoSource(clip, fps=5)).footprint() == sampled


def test_a_sampled_read_plans_its_decoders_and_the_frames_they_hold(folder: Path):
    from hyperframes.io.decoder_memory import (
        decoder_bytes,
        frame_bytes,
        held_bytes,
        sampled_bytes,
    )
    from hyperframes.io.video import VideoSource

    clip = folder / "large_4k.mp4"
    source = VideoSource(clip, fps=5, workers=2)
    facts = source._facts
    frame, _ = frame_bytes(facts["width"], facts["height"], facts["pix_fmt"], None, "rgb24")
    decoded = facts["width"] * facts["height"] * 3 // 2
    got = source.footprint()
    assert got.least == decoder_bytes(frame, 1) + held_bytes(decoded, 1)
    assert got.wants >= sampled_bytes(frame, decoded, 2) > got.least
    source.use_memory(got.least)
    assert source._worker_cap == 1
    source.use_memory(sampled_bytes(frame, decoded, 2))
    assert source._worker_cap == 2
    # a resize to the stream's own size makes no scratch frame, and plans none
    same = VideoSource(clip, size=(facts["width"], facts["height"])).footprint()
    assert same == VideoSource(clip).footprint()


def test_the_refusal_names_what_each_part_holds():
    from hyperframes.engine.plan import plan_run
    from hyperframes.frames import FrameSpec
    from hyperframes.io.base import Footprint

    with pytest.raises(MemoryError, match=r"and the results' 4 MiB, and the decoder's 2 MiB"):
        plan_run(FrameSpec((100, 100, 3)), [], budget=1000,
                 sink=Footprint("results", least=4 << 20),
                 source=Footprint("decoder", least=2 << 20))  # fmt: skip
