"""Sampling at decode (issue 51): ``hyperframes map`` with ``--fps``, ``--keyframes`` and
``--at`` against decoding every frame, against ``--every`` as the code before it decoded
(every frame, a few converted), and against decord doing the same sampling: whole
commands as a user runs them (start-up included), side by side, interleaved, in one run.

The inputs are made once (cached in ``/tmp/hyperframes-sampling``): Big Buck Bunny's 132
frames played forwards and back, at 1920x1080, 25 fps, H.264 by x264's ``veryfast``
preset (B-frames, as most encoders write them), for ``--minutes`` (10). One minute is
encoded and its packets repeated, so the file is a real 10-minute stream at a tenth of
the encoding time. Two cadences: a key frame every 10 s (``--fps``, ``--keyframes``) and
every 2 s (``--at``).

Each round runs, on the 10-s file: every frame; ``--every 25`` on the code before
sampling at decode (``--before``, a git revision, unpacked to /tmp); ``--every 25``;
``--fps 1``; ``--keyframes``; decord's ``get_batch`` at one frame a second and at the key
frames. On the 2-s file: every frame; ``--at`` 100 random times; decord at the same
frames. It prints the best wall time of ``--repeats`` rounds and the ratios the issue
names. Goals: ``--keyframes`` >= 10x every frame; ``--fps 1`` >= 1.5x ``--every 25`` on
the code before; ``--at`` >= 5x every frame; each >= 1.0x decord doing the same.

The peers, as their users call them, in chunks of 16 frames: torchcodec
(``get_frames_played_at``, ``get_frames_at`` at its key frames; ``seek_mode="exact"``, a
scan of the packets as ours) and decord (``get_batch``). torchcodec 0.13.0 is the newest
that runs here: 0.14 to 0.17 on the registry are CUDA builds (they need libtorch_cuda and
libnvrtc), and 0.13.0 is a CPU build that loads beside torch 2.13 and the system's FFmpeg
5.1 (``pip install torchcodec==0.13.0``).

Run:  pip install torchcodec==0.13.0 decord
      python benchmarks/sampling.py [--minutes 10] [--repeats 2] [--before 3e8926d]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import time
from pathlib import Path

import av

from clips import encode_bunny  # this folder's helper: the real clips

CACHE = Path("/tmp/hyperframes-sampling")
REPO = Path(__file__).resolve().parents[1]
FUNCTION = "def mean(frames):\n    return [float(f[::8, ::8].mean()) for f in frames]\n"
DECORD = """
import sys, json, decord
import numpy as np
vr = decord.VideoReader(sys.argv[1], ctx=decord.cpu(0))
how = sys.argv[2]
if how == "keyframes":
    wanted = list(vr.get_key_indices())
elif how == "fps":
    times = vr.get_frame_timestamp(range(len(vr)))[:, 0]
    instants = np.arange(times[0], times[-1] + 0.04, 1.0)
    wanted = [int(np.searchsorted(times, t + 1e-9, side="right") - 1) for t in instants]
else:
    times = vr.get_frame_timestamp(range(len(vr)))[:, 0]
    asked = [float(t) for t in open(how).read().split()]
    wanted = [int(np.searchsorted(times, t + 1e-9, side="right") - 1) for t in asked]
means = []
for k in range(0, len(wanted), 16):
    means += [float(f[::8, ::8].mean()) for f in vr.get_batch(wanted[k:k + 16]).asnumpy()]
print(len(means))
"""
TORCHCODEC = """
import sys
import numpy as np
from torchcodec.decoders import VideoDecoder
decoder = VideoDecoder(sys.argv[1], seek_mode="exact")  # a scan of the packets, as ours
how, means = sys.argv[2], []
if how == "keyframes":
    wanted = decoder._get_key_frame_indices().tolist()
    for k in range(0, len(wanted), 16):
        batch = decoder.get_frames_at(wanted[k:k + 16]).data
        means += [float(f[:, ::8, ::8].float().mean()) for f in batch]
else:
    meta = decoder.metadata
    if how == "fps":
        times = np.arange(meta.begin_stream_seconds, meta.end_stream_seconds, 1.0).tolist()
    else:
        times = [float(t) for t in open(how).read().split()]
    for k in range(0, len(times), 16):
        batch = decoder.get_frames_played_at(times[k:k + 16]).data
        means += [float(f[:, ::8, ::8].float().mean()) for f in batch]
print(len(means))
"""


def make_clip(minutes: float, gop: int) -> Path:
    """The input, made once per cadence: one minute encoded, its packets repeated."""
    out = CACHE / f"clip-{minutes:g}min-1080p-g{gop}.mp4"
    if out.is_file():
        return out
    CACHE.mkdir(parents=True, exist_ok=True)
    minute = encode_bunny(CACHE / f"minute-g{gop}.mp4", size=(1920, 1080), frames=1500, gop=gop)
    temp = out.with_suffix(".partial.mp4")
    with av.open(str(minute)) as src, av.open(str(temp), "w") as dst:
        inp = src.streams.video[0]
        stream = dst.add_stream_from_template(inp)
        packets = [p for p in src.demux(inp) if p.size]
        span = 1500 * int(1 / (inp.time_base * 25))  # a minute in the stream's time base
        for lap in range(int(minutes)):
            for packet in packets:
                packet.stream = stream
                copy = av.Packet(bytes(packet))
                copy.stream, copy.time_base = stream, packet.time_base
                copy.pts = packet.pts + lap * span
                copy.dts = packet.dts + lap * span
                copy.is_keyframe = packet.is_keyframe
                dst.mux(copy)
    temp.rename(out)
    return out


def unpack_before(revision: str) -> Path:
    """The package as it was at ``revision`` (its ``src`` folder), for the code before."""
    folder = CACHE / f"before-{revision}"
    if not (folder / "src" / "hyperframes").is_dir():
        folder.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(["git", "-C", str(REPO), "archive", revision, "src"],
                                 check=True, capture_output=True).stdout  # fmt: skip
        subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
    return folder / "src"


def timed(argv: list[str], path: str = "") -> float:
    start = time.perf_counter()
    env = {"PYTHONPATH": ":".join(p for p in (str(CACHE), path) if p), "PATH": "/usr/bin:/bin"}
    done = subprocess.run(argv, cwd=CACHE, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-1500:]}")
    return time.perf_counter() - start


def rows(name: str) -> list[dict]:
    return [json.loads(line) for line in (CACHE / name).read_text().splitlines()]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--before", default="3e8926d", help="the revision before sampling")
    args = parser.parse_args()
    ten, two = make_clip(args.minutes, 250), make_clip(args.minutes, 50)
    before = unpack_before(args.before)
    (CACHE / "fn.py").write_text(FUNCTION)
    with av.open(str(two)) as container:
        stream = container.streams.video[0]
        span = float(stream.duration * stream.time_base)
    rng = random.Random(51)
    (CACHE / "times.txt").write_text("\n".join(f"{rng.uniform(0, span):.3f}" for _ in range(100)))

    def hf(clip: Path, out: str, *extra: str, code: str = "") -> tuple[list[str], str]:
        argv = [sys.executable, "-m", "hyperframes", "map", str(clip), "fn:mean"]
        return [*argv, "--overwrite", "--out", out, *extra], code

    def decord(clip: Path, how: str) -> tuple[list[str], str]:
        return [sys.executable, "-c", DECORD, str(clip), how], ""

    def torchcodec(clip: Path, how: str) -> tuple[list[str], str]:
        return [sys.executable, "-c", TORCHCODEC, str(clip), how], ""

    runs = {
        "10 s GOPs: every frame": hf(ten, "all.jsonl"),
        "10 s GOPs: --every 25, code before": hf(
            ten, "before.jsonl", "--every", "25", code=str(before)
        ),
        "10 s GOPs: --every 25": hf(ten, "every.jsonl", "--every", "25"),
        "10 s GOPs: --fps 1": hf(ten, "fps.jsonl", "--fps", "1"),
        "10 s GOPs: --keyframes": hf(ten, "keys.jsonl", "--keyframes"),
        "10 s GOPs: torchcodec, 1 a second": torchcodec(ten, "fps"),
        "10 s GOPs: torchcodec, key frames": torchcodec(ten, "keyframes"),
        "10 s GOPs: decord, 1 a second": decord(ten, "fps"),
        "10 s GOPs: decord, key frames": decord(ten, "keyframes"),
        "2 s GOPs: every frame": hf(two, "all2.jsonl"),
        "2 s GOPs: --at 100 times": hf(two, "at.jsonl", "--at", "times.txt"),
        "2 s GOPs: torchcodec, 100 times": torchcodec(two, str(CACHE / "times.txt")),
        "2 s GOPs: decord, 100 times": decord(two, str(CACHE / "times.txt")),
    }
    best = {name: float("inf") for name in runs}
    for _ in range(args.repeats):
        for name, (argv, path) in runs.items():
            best[name] = min(best[name], timed(argv, path))
            print(f"  {name}: {best[name]:.2f} s", file=sys.stderr)
    fps, before_rows = rows("fps.jsonl"), rows("before.jsonl")
    assert [r["frame"] for r in fps] == [r["frame"] for r in before_rows]  # the same frames
    assert [r["value"] for r in fps] == [r["value"] for r in before_rows]  # the same pixels
    print(
        f"{ten.name}: {int(args.minutes * 1500)} frames; {two.name}; "
        f"{len(rows('keys.jsonl'))} key frames, {len(fps)} at 1 a second, 100 --at times"
    )
    print("| run | wall s |")
    print("|---|---:|")
    for name, wall in best.items():
        print(f"| {name} | {wall:.2f} |")
    compared = [  # (what, the slower run, the faster run)
        ("--keyframes vs every frame (goal >= 10)", "10 s GOPs: every frame",
         "10 s GOPs: --keyframes"),
        ("--fps 1 vs --every 25 before (goal >= 1.5)", "10 s GOPs: --every 25, code before",
         "10 s GOPs: --fps 1"),
        ("--at vs every frame (goal >= 5)", "2 s GOPs: every frame", "2 s GOPs: --at 100 times"),
    ] + [
        (f"{ours} vs {peer}" + (" (goal >= 1.0)" if peer == "torchcodec" else ""),
         f"{gops} GOPs: {peer}, {how}", f"{gops} GOPs: {ours}")
        for peer in ("torchcodec", "decord")
        for ours, gops, how in (("--fps 1", "10 s", "1 a second"),
                                ("--keyframes", "10 s", "key frames"),
                                ("--at 100 times", "2 s", "100 times"))
    ]  # fmt: skip
    ratios = {what: best[slow] / best[fast] for what, slow, fast in compared}
    for name, ratio in ratios.items():
        print(f"{name}: {ratio:.2f}x")
    print(json.dumps({"wall": best, "ratios": ratios}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
