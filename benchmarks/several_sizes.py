"""A folder of clips of several sizes, each read at its own (issue 50), whole commands side
by side, interleaved: what one large clip among small ones costs the small ones.

Three folders, made once (``/tmp/hyperframes-several-sizes``): ``small`` holds
``--clips`` copies of bikes (640x272, 250 frames); ``mixed`` the same and one 4K H.264
clip of 24 frames (a brightening ramp, cheap to decode: what is measured is what the
large frames do to the small ones' batches), whose frames set the run's plan (a batch of
one); ``mixed --size`` reads ``mixed`` at 640x272. Each runs ``hyperframes map DIR
fn:mean --out x.parquet --workers 2``, a cheap function (a frame's mean), so what is
measured is the reading and the batches. A batch of the small clips' frames holds as
many as the 4K plan's slot fits (``VideoFiles.fill_by_bytes``: 16 of bikes), not one.

Reported: frames/s of the whole command (start-up included) and the peak RSS of its
largest process, best of ``--repeats``, and the ratios against ``small``.

Run:  python benchmarks/several_sizes.py [--clips 16] [--repeats 3]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

from clips import clip_folder  # this folder's helper: the real clips

CACHE = Path("/tmp/hyperframes-several-sizes")
FUNCTION = "def mean(frames):\n    return frames.reshape(len(frames), -1).mean(axis=1)\n"
ENCODE_4K = """
import sys, av, numpy as np
ramp = np.linspace(0, 200, 3840, dtype=np.float32)[None, :, None]
with av.open(sys.argv[1], "w") as container:
    stream = container.add_stream("libx264", rate=25)
    stream.width, stream.height, stream.pix_fmt = 3840, 2160, "yuv420p"
    for i in range(24):  # a ramp that brightens: cheap to decode, as the small clips are
        image = np.broadcast_to(ramp + 2 * i, (2160, 3840, 3)).astype(np.uint8)
        frame = av.VideoFrame.from_ndarray(image, format="rgb24")
        container.mux(stream.encode(frame))
    container.mux(stream.encode())
"""


def make(clips: int) -> Path:
    """The folders (made once for a number of clips) and the function's module."""
    root = CACHE / f"{clips}"
    if (root / "done").is_file():
        return root
    for name in ("small", "mixed"):
        (root / name).mkdir(parents=True, exist_ok=True)
        for k in range(clips):
            shutil.copy(clip_folder() / "bikes.mp4", root / name / f"b{k:03d}.mp4")
    # (in a process of its own: x264 takes a GiB at 4K, and a child of this process would
    # inherit that peak in what wait4 tells of it)
    subprocess.run([sys.executable, "-c", ENCODE_4K, str(root / "mixed" / "z_4k.mp4")], check=True)
    (root / "fn.py").write_text(FUNCTION)
    (root / "done").touch()
    return root


def run(root: Path, folder: str, extra: list[str]) -> tuple[float, int, float]:
    """One whole command: seconds, frames, and the peak RSS (MiB) of its largest process
    (``wait4``'s, which counts the reader process it waited for)."""
    out = root / "rows.parquet"
    argv = [sys.executable, "-m", "hyperframes", "map", folder, "fn:mean", "--out", str(out),
            "--overwrite", "--workers", "2", "--json", *extra]  # fmt: skip
    start = time.perf_counter()
    child = subprocess.Popen(argv, cwd=root, stdout=subprocess.PIPE, text=True)
    report = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited with {child.returncode}")
    return seconds, json.loads(report)["frames"], usage.ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clips", type=int, default=16)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    root = make(args.clips)
    cases = {"small": ("small", []), "mixed": ("mixed", []),
             "mixed --size": ("mixed", ["--size", "640x272"])}  # fmt: skip
    best: dict[str, tuple[float, int, float]] = {}
    for _ in range(args.repeats):
        for name, (folder, extra) in cases.items():
            seconds, frames, peak = run(root, folder, extra)
            print(f"  {name}: {frames} frames in {seconds:.2f} s", flush=True)
            if name not in best or seconds < best[name][0]:
                best[name] = (seconds, frames, peak)
    print(f"\n{args.clips} clips of 640x272 (and one 4K), best of {args.repeats}")
    print("| folder | frames/s | wall s | peak RSS MiB |\n|---|---:|---:|---:|")
    for name, (seconds, frames, peak) in best.items():
        print(f"| {name} | {frames / seconds:.1f} | {seconds:.2f} | {peak:.0f} |")
    fps = {name: frames / seconds for name, (seconds, frames, _) in best.items()}
    for name in ("mixed", "mixed --size"):
        print(f"{name} vs small (frames/s): {fps[name] / fps['small']:.2f}x")


if __name__ == "__main__":
    main()
