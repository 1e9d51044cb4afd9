"""Memory follows the frames' bytes: runs at 4K in fresh processes, peak RSS asserted.

Each run happens in its own interpreter so that its peak RSS is its own (``VmHWM``:
``ru_maxrss`` keeps the parent's peak across fork and exec); the figure compared is the
peak over the interpreter's own baseline (imports and the test's frames).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np
import pytest

MIB = 1 << 20

CHILD = r"""
import json, sys
import numpy as np
import hyperframes as hf
from hyperframes import FrameSpec, Pipeline, Retry, ReuseTarget  # imported before the baseline

job = json.loads(sys.argv[1])
h, w = job["shape"]
bank = np.random.default_rng(0).integers(0, 256, (2, h, w, 3), dtype=np.uint8)
def hwm():  # this process's peak RSS (ru_maxrss would carry the parent's over from fork)
    with open("/proc/self/status") as status:
        line = next(line for line in status if line.startswith("VmHWM:"))
    return int(line.split()[1]) * 1024

base = hwm()

def invert(frames):
    if job["mode"] == "new-arrays":
        return 255 - frames
    np.bitwise_not(frames, out=frames)
    return frames

def brightness(frames):
    return [float(f[::64, ::64].mean()) for f in frames]

pipeline = Pipeline.from_generator(lambda i: bank[i % 2], count=job["frames"],
                                   spec=FrameSpec((h, w, 3)), workers=2)
if job["mode"] == "retries":
    pipeline = pipeline.map(invert, workers=2, faults=Retry(retries=1))
elif job["mode"] == "reuse":
    pipeline = pipeline.map(brightness, workers=2, into="b", reuse=ReuseTarget(0.9))
else:
    pipeline = pipeline.map(invert, workers=2)
report = pipeline.run(memory=job["memory"])
peak = hwm()
frame = h * w * 3
print(json.dumps({"over": peak - base, "batch": report.batch_size, "budget": report.memory_budget,
                  "pools": report.pool_bytes, "frames": report.frames, "frame": frame}))
"""


def run_child(**job: object) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(job)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("mode", ["in-place", "new-arrays", "retries", "reuse"])
def test_4k_at_defaults_holds_what_its_plan_says(mode):
    """Peak RSS over the baseline (after the imports) is the plan, within 10 %: the pools,
    the retries' backups and reuse's rows included (scratch pools the plan makes); a
    function that returns new arrays adds its own, one frame a worker."""
    got = run_child(shape=(2160, 3840), frames=40, memory=None, mode=mode)
    assert got["frames"] == 40 and got["batch"] == 1
    assert got["pools"] <= got["budget"] <= 1 << 30
    own = 2 * got["frame"] if mode == "new-arrays" else 0  # the function's: not the plan's
    held = got["pools"] + own
    assert got["over"] <= 1.1 * held, f"{got['over'] / MIB:.0f} MiB over, {held / MIB:.0f} planned"
    assert got["over"] >= 0.9 * got["pools"], "the pools were planned but never touched?"


def test_a_budget_of_300_mib_holds():
    got = run_child(shape=(2160, 3840), frames=40, memory="300MiB", mode="retries")
    assert got["budget"] == 300 * MIB and got["pools"] <= 300 * MIB
    assert got["over"] <= 1.1 * got["pools"], f"{got['over'] / MIB:.0f} MiB over the baseline"


def test_a_budget_too_small_for_one_frame_per_slot_fails_before_anything_starts(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "hyperframes", "render", "numpy:zeros", "out.mp4", "--frames", "4",
         "--size", "3840x2160", "--memory", "20MiB"],
        capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and "memory budget of 20 MiB cannot hold" in done.stderr
    assert "--memory" in done.stderr and not list(tmp_path.iterdir())


@pytest.fixture(scope="module")
def clip_4k(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("k4") / "k4.mp4"
    y, x = np.mgrid[0:2160, 0:3840]
    noise = np.random.default_rng(0).integers(0, 16, (2160, 3840, 3), dtype=np.uint8)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=30)
        stream.width, stream.height, stream.pix_fmt = 3840, 2160, "yuv420p"
        stream.options = {"preset": "ultrafast", "crf": "18"}
        for i in range(24):
            image = np.dstack([(x // 8 + 3 * i) % 256, (y // 8) % 256, (x + y) // 16 % 256])
            frame = av.VideoFrame.from_ndarray(image.astype(np.uint8) + noise, format="rgb24")
            frame.pts = i
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path


@pytest.mark.slow  # 15 s with its 4K clip: the slow run's
def test_pack_at_4k_follows_the_budget(clip_4k, tmp_path):
    """The pools, the sink's group buffer and the groups being encoded all count."""
    script = (
        "import sys\n"
        "from hyperframes.cli import main\n"
        "def hwm():\n"
        "    with open('/proc/self/status') as status:\n"
        "        return int(next(x for x in status if x.startswith('VmHWM:')).split()[1]) * 1024\n"
        "base = hwm()\n"
        "code = main(sys.argv[1:])\n"
        "peak = hwm()\n"
        "print(peak - base)\n"
        "sys.exit(code)\n"
    )
    store = tmp_path / "k4.hfs"
    done = subprocess.run(
        [sys.executable, "-c", script, "pack", str(clip_4k), str(store), "--memory", "512MiB",
         "--json"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    summary, over = done.stdout.strip().splitlines()
    assert json.loads(summary)["frames"] == 24
    # 512 MiB of frames, plus the decoder's and the codec's own buffers (about 300 MiB)
    assert int(over) <= (512 + 320) * MIB, f"{int(over) / MIB:.0f} MiB over the baseline"


def invert_in_place(frames: np.ndarray) -> np.ndarray:
    np.bitwise_not(frames, out=frames)
    return frames


def test_processes_follow_the_same_budget():
    """Shared-memory pools are the budget too: the plan does not depend on the executor."""
    import hyperframes as hf

    frames = np.zeros((64, 270, 480, 3), np.uint8)
    budget = 8 << 20
    report = (
        hf.Pipeline.from_frames(frames)
        .map(invert_in_place, workers=2)
        .run(executor="processes", memory=budget)
    )
    assert report.frames == 64 and report.memory_budget == budget
    assert report.pool_bytes <= budget and report.batch_size == 4  # 5 slots of 4 frames fit
