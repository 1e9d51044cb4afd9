"""Sizing by bytes: the default (automatic) batch size against fixed ones, side by side.

Each measurement runs in a fresh process (so peak RSS is its own) and times the whole
``run()`` call, set-up included. Work: frames rendered by a generator (a copy from a
bank of 4 random frames) and an in-place 7x7 Gaussian blur (OpenCV held to one thread,
so it releases the GIL) on 2 workers, consumed by a checksum.

1. 1080p: defaults vs ``batch_size`` 1, 4, 16, 64: wall and peak RSS; the default's wall
   against the best fixed one (target: within 1.15x).
2. Peak RSS at defaults for 4K (target <= 1 GiB) and 1080p (target <= 700 MiB), and with
   ``memory="300MiB"`` (target <= 300 MiB + 120 MiB over the interpreter's baseline).
3. 720p render + invert: the pipeline with 1 worker against a hand loop over one
   preallocated batch buffer (target >= 0.9x); blur with 2 workers against 1 (>= 1.6x).

Run:  python benchmarks/sizing.py [--frames 240] [--repeat 2]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

SIZES = {"720p": (720, 1280), "1080p": (1080, 1920), "4k": (2160, 3840)}


def child(job: dict) -> dict:
    """One measurement, in this (fresh) process."""
    import cv2
    import numpy as np

    import hyperframes as hf

    cv2.setNumThreads(1)
    h, w = SIZES[job["size"]]
    bank = np.random.default_rng(0).integers(0, 256, (4, h, w, 3), dtype=np.uint8)
    baseline = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    total = {"sum": 0}

    def render(i: int) -> np.ndarray:
        return bank[i % 4]

    def blur(frames: np.ndarray) -> np.ndarray:
        for f in frames:
            cv2.GaussianBlur(f, (7, 7), 0, dst=f)
        return frames

    def invert(frames: np.ndarray) -> np.ndarray:
        np.bitwise_not(frames, out=frames)
        return frames

    work = blur if job["work"] == "blur" else invert

    def consume(ids: np.ndarray, frames: np.ndarray) -> None:
        total["sum"] += int(frames[:, ::64, ::64].sum(dtype=np.uint64))

    n = job["frames"]
    start = time.perf_counter()
    if job["way"] == "hand":  # one preallocated batch buffer, the same work, no engine
        size = job["batch"] or 16
        buffer = np.empty((size, h, w, 3), np.uint8)
        for first in range(0, n, size):
            count = min(size, n - first)
            for j in range(count):
                buffer[j] = render(first + j)
            work(buffer[:count])
            consume(np.arange(first, first + count), buffer[:count])
        report = None
    else:
        spec = hf.FrameSpec((h, w, 3))
        pipeline = hf.Pipeline.from_generator(
            render, count=n, spec=spec, workers=1, batch_size=job["batch"]
        )
        report = (
            pipeline.map(work, workers=job["workers"])
            .for_each(consume, batched=True)
            .run(memory=job["memory"])
        )
    wall = time.perf_counter() - start
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out = {"wall": wall, "peak": peak, "baseline": baseline}
    if report is not None:
        out.update(batch=report.batch_size, slots=report.pool_slots, setup=report.setup_s)
    return out


def measure(**job) -> dict:
    job = {"workers": 2, "batch": None, "memory": None, "work": "blur", "way": "engine", **job}
    done = subprocess.run(
        [sys.executable, __file__, "--child", json.dumps(job)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def best_of(repeat: int, **job) -> dict:
    runs = [measure(**job) for _ in range(repeat)]
    return min(runs, key=lambda r: r["wall"])


def mib(nbytes: float) -> str:
    return f"{nbytes / 2**20:.0f} MiB"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frames", type=int, default=240)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))))
        return
    n, r = args.frames, args.repeat

    print(f"1) 1080p, {n} frames, blur on 2 workers: default vs fixed batch sizes")
    rows = {"default": best_of(r, size="1080p", frames=n)}
    for batch in (1, 4, 16, 64):
        rows[f"batch {batch}"] = best_of(r, size="1080p", frames=n, batch=batch)
    best = min(v["wall"] for k, v in rows.items() if k != "default")
    for name, row in rows.items():
        extra = f" (chose batch {row['batch']}, {row['slots']} slots)" if name == "default" else ""
        print(f"   {name:<9} {row['wall']:6.2f} s  peak {mib(row['peak']):>9}{extra}")
    print(f"   default / best fixed wall: {rows['default']['wall'] / best:.2f}x (target <= 1.15)")

    print("2) peak RSS at defaults (in-place blur, 2 workers)")
    for size, frames, target in (("4k", 60, 1 << 30), ("1080p", n, 700 << 20)):
        row = best_of(1, size=size, frames=frames)
        verdict = "held" if row["peak"] <= target else "NOT held"
        print(
            f"   {size:<6} {frames} frames: peak {mib(row['peak'])} (target <= {mib(target)}: "
            f"{verdict}); batch {row['batch']}, {row['slots']} slots, "
            f"set-up {row['setup']:.3f} s"
        )
    row = best_of(1, size="4k", frames=60, memory="300MiB")
    over = row["peak"] - row["baseline"]
    verdict = "held" if over <= (300 + 120) << 20 else "NOT held"
    print(
        f"   4k with memory='300MiB': peak {mib(row['peak'])}, {mib(over)} over the "
        f"interpreter's {mib(row['baseline'])} (target <= 420 MiB over: {verdict})"
    )

    print(f"3) 720p, {n * 4} frames: engine at defaults vs a hand loop over one batch buffer")
    hand = best_of(r, size="720p", frames=n * 4, way="hand", work="invert")
    one = best_of(r, size="720p", frames=n * 4, workers=1, work="invert")
    print(
        f"   hand loop {hand['wall']:.2f} s, pipeline 1 worker {one['wall']:.2f} s: "
        f"{hand['wall'] / one['wall']:.2f}x (target >= 0.9)"
    )
    b1 = best_of(r, size="720p", frames=n * 2, workers=1)
    b2 = best_of(r, size="720p", frames=n * 2, workers=2)
    print(
        f"   blur 1 worker {b1['wall']:.2f} s, 2 workers {b2['wall']:.2f} s: "
        f"{b1['wall'] / b2['wall']:.2f}x (target >= 1.6)"
    )


if __name__ == "__main__":
    main()
