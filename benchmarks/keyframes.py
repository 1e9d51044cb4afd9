"""Only the key frames (issue 51): ``hyperframes map --keyframes`` against decoding every
frame, whole commands as a user runs them, side by side in one run.

The input is made once (cached in ``/tmp/hyperframes-keyframes``): Big Buck Bunny's 132
frames played forwards and back until ``--minutes`` are filled, at ``--size`` (1920x1080 by
default), H.264 with a key frame every ``--gop`` frames (250: 10 s at 25 fps). Each round
runs, interleaved:

* ``every frame``: ``hyperframes map clip.mp4 fn:mean --out all.jsonl`` (every frame
  decoded, converted and given to the function);
* ``--every GOP``: the same frames' count as the key frames, by index (today's way to
  sample: every frame decoded, few converted);
* ``--keyframes``: only the key frames' packets reach the decoder;
* ``PyAV, every frame``: a plain ``for frame in container.decode(video=0)`` loop with
  ``to_ndarray(format="rgb24")`` on the key frames only (what a user writes by hand).

It prints the best wall time of ``--repeats`` rounds of each and the ratios to
``--keyframes``. Goal (issue 51): ``--keyframes`` >= 10x decoding every frame.

Run:  python benchmarks/keyframes.py [--minutes 2] [--repeats 3] [--size 1920x1080]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

from clips import encode_bunny  # this folder's helper: the real clips

CACHE = Path("/tmp/hyperframes-keyframes")
FUNCTION = "def mean(frames):\n    return [float(f[::8, ::8].mean()) for f in frames]\n"
PYAV = """
import sys, av
with av.open(sys.argv[1]) as c:
    kept = sum(1 for f in c.decode(video=0) if f.key_frame and f.to_ndarray(format="rgb24").size)
print(kept)
"""


def make_clip(minutes: float, size: tuple[int, int], gop: int) -> Path:
    """The input, made once per set of options (x264 ``ultrafast``, as first measured)."""
    out = CACHE / f"clip-{minutes:g}min-{size[0]}x{size[1]}-g{gop}.mp4"
    return encode_bunny(out, size=size, frames=int(minutes * 60 * 25), gop=gop,
                        x264={"preset": "ultrafast"}, as_decoded=True)  # fmt: skip


def timed(argv: list[str]) -> float:
    start = time.perf_counter()
    done = subprocess.run(argv, cwd=CACHE, capture_output=True, text=True,
                          env={"PYTHONPATH": str(CACHE), "PATH": "/usr/bin:/bin"})  # fmt: skip
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {done.stderr[-1000:]}")
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=2.0)
    parser.add_argument("--size", default="1920x1080")
    parser.add_argument("--gop", type=int, default=250)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    size = tuple(int(v) for v in args.size.split("x"))
    clip = make_clip(args.minutes, (size[0], size[1]), args.gop)
    (CACHE / "fn.py").write_text(FUNCTION)
    hf = [sys.executable, "-m", "hyperframes", "map", str(clip), "fn:mean", "--overwrite"]
    runs = {
        "every frame": [*hf, "--out", "all.jsonl"],
        f"--every {args.gop}": [*hf, "--out", "every.jsonl", "--every", str(args.gop)],
        "--keyframes": [*hf, "--out", "keys.jsonl", "--keyframes"],
        "PyAV, every frame": [sys.executable, "-c", PYAV, str(clip)],
    }
    best = {name: float("inf") for name in runs}
    for _ in range(args.repeats):
        for name, argv in runs.items():
            best[name] = min(best[name], timed(argv))
    keys = sum(1 for _ in (CACHE / "keys.jsonl").open())
    print(f"{clip.name}: {int(args.minutes * 60 * 25)} frames, {keys} key frames")
    print("| approach | wall s | --keyframes is |")
    print("|---|---:|---:|")
    for name, wall in best.items():
        print(f"| {name} | {wall:.2f} | {wall / best['--keyframes']:.1f}x faster |")
    print(json.dumps({"frames": int(args.minutes * 1500), "keyframes": keys, "wall": best}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
