"""Engine benchmark: the same work done five ways, side by side, with ratios and peak RSS.

Work: N synthetic 720p RGB frames (copied from a bank of 4 random frames), an invert
stage, consumed by a checksum. Approaches:

  a) plain per-frame Python loop (allocates a frame per step)
  b) in-place loop over one preallocated batch buffer
  c) ThreadPoolExecutor.map over all frames
  d) the pipeline with 1 and 2 workers per stage

Scaling is checked on a heavier GIL-releasing stage (a 7x7 Gaussian blur with OpenCV
held to one thread per call), and flat memory by running the pipeline at N and 10 N
frames in fresh processes. Each measurement runs in its own process so peak RSS is its own;
timings include everything after imports (the pipeline's pool allocation too).

Run:  python benchmarks/engine.py [--frames 3000] [--rss-frames 30000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import cv2
import numpy as np

from hyperframes import FrameSpec, Pipeline  # imported up front: not part of any timing

H, W = 720, 1280
BATCH = 32


def bank() -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (4, H, W, 3), dtype=np.uint8)


def checksum(frames: np.ndarray) -> int:
    return int(frames[..., ::16, ::16, :].sum(dtype=np.uint64))


def invert_inplace(frames: np.ndarray) -> np.ndarray:
    np.bitwise_not(frames, out=frames)
    return frames


def blur_inplace(frames: np.ndarray) -> np.ndarray:
    for f in frames:
        cv2.GaussianBlur(f, (7, 7), 0, dst=f)
    return frames


STAGES = {"invert": invert_inplace, "blur": blur_inplace}


def run_plain(n: int, stage: str) -> int:
    frames, total = bank(), 0
    for i in range(n):
        frame = frames[i % 4].copy()
        out = cv2.bitwise_not(frame) if stage == "invert" else cv2.GaussianBlur(frame, (7, 7), 0)
        total += checksum(out)
    return total


def run_batch_loop(n: int, stage: str) -> int:
    frames, total, fn = bank(), 0, STAGES[stage]
    buf = np.empty((BATCH, H, W, 3), np.uint8)
    for start in range(0, n, BATCH):
        count = min(BATCH, n - start)
        for j in range(count):
            buf[j] = frames[(start + j) % 4]
        total += checksum(fn(buf[:count]))
    return total


def run_threadpool(n: int, stage: str) -> int:
    frames, total = bank(), 0

    def work(i: int) -> np.ndarray:
        frame = frames[i % 4].copy()
        return STAGES[stage](frame[None])[0]

    with ThreadPoolExecutor(2) as pool:
        for out in pool.map(work, range(n)):
            total += checksum(out)
    return total


def run_pipeline(n: int, stage: str, workers: int) -> int:
    frames, total = bank(), 0

    def add(ids: np.ndarray, batch: np.ndarray) -> None:
        nonlocal total
        total += checksum(batch)

    Pipeline.from_generator(
        lambda i: frames[i % 4],
        count=n,
        spec=FrameSpec((H, W, 3)),
        workers=workers,
        batch_size=BATCH,
    ).map(STAGES[stage], workers=workers, name=f"map:{stage}").for_each(add, batched=True).run()
    return total


def child(mode: str, n: int, stage: str) -> None:
    cv2.setNumThreads(1)
    t0 = time.perf_counter()
    if mode == "plain":
        total = run_plain(n, stage)
    elif mode == "batch-loop":
        total = run_batch_loop(n, stage)
    elif mode == "threadpool":
        total = run_threadpool(n, stage)
    else:
        total = run_pipeline(n, stage, int(mode.split("-")[1]))
    wall = time.perf_counter() - t0
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"fps": n / wall, "rss_mib": rss_mib, "checksum": total}))


def measure(mode: str, n: int, stage: str) -> dict:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, "--frames", str(n), "--stage", stage],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--frames", type=int, default=3000)
    ap.add_argument("--rss-frames", type=int, default=30000)
    ap.add_argument("--stage", default="invert")
    ap.add_argument("--child", default=None)
    args = ap.parse_args()
    if args.child:
        child(args.child, args.frames, args.stage)
        return

    n = args.frames
    print(f"# engine benchmark: {n} x {W}x{H} RGB frames, batch {BATCH}, 2 cores\n")
    rows = {}
    for mode in ["plain", "batch-loop", "threadpool", "pipeline-1", "pipeline-2"]:
        rows[mode] = measure(mode, n, "invert")
        r = rows[mode]
        print(f"invert  {mode:<12} {r['fps']:8.0f} fps  peak RSS {r['rss_mib']:7.0f} MiB")
    sums = {r["checksum"] for r in rows.values()}
    assert len(sums) == 1, f"approaches disagree: {rows}"
    blur = {m: measure(m, n // 2, "blur") for m in ["batch-loop", "pipeline-1", "pipeline-2"]}
    for mode, r in blur.items():
        print(f"blur    {mode:<12} {r['fps']:8.0f} fps  peak RSS {r['rss_mib']:7.0f} MiB")

    small = measure("pipeline-2", n, "invert")
    large = measure("pipeline-2", args.rss_frames, "invert")
    tp_small = measure("threadpool", n // 3, "invert")
    tp_large = rows["threadpool"]
    print(
        f"\npipeline-2 peak RSS: {small['rss_mib']:.0f} MiB at {n} frames, "
        f"{large['rss_mib']:.0f} MiB at {args.rss_frames} frames"
    )
    print(
        f"threadpool peak RSS: {tp_small['rss_mib']:.0f} MiB at {n // 3} frames, "
        f"{tp_large['rss_mib']:.0f} MiB at {n} frames\n"
    )

    def ratio(name: str, value: float, target: float | None, op: str = ">=") -> None:
        ok = (
            ""
            if target is None
            else (
                "  held" if (value >= target if op == ">=" else value <= target) else "  NOT HELD"
            )
        )
        goal = "" if target is None else f"  (target {op} {target})"
        print(f"{name:<52} {value:6.2f}{goal}{ok}")

    print("ratios")
    ratio(
        "pipeline-1 / batch-loop (invert)",
        rows["pipeline-1"]["fps"] / rows["batch-loop"]["fps"],
        0.9,
    )
    ratio(
        "pipeline-2 / pipeline-1 (invert)",
        rows["pipeline-2"]["fps"] / rows["pipeline-1"]["fps"],
        None,
    )
    ratio(
        "pipeline-2 / pipeline-1 (blur, GIL released)",
        blur["pipeline-2"]["fps"] / blur["pipeline-1"]["fps"],
        1.6,
    )
    ratio(
        "pipeline-2 / plain loop (invert)", rows["pipeline-2"]["fps"] / rows["plain"]["fps"], None
    )
    ratio(
        "pipeline-2 / threadpool (invert)",
        rows["pipeline-2"]["fps"] / rows["threadpool"]["fps"],
        None,
    )
    ratio(
        f"pipeline RSS {args.rss_frames} / {n} frames",
        large["rss_mib"] / small["rss_mib"],
        1.05,
        "<=",
    )
    ratio(f"threadpool RSS {n} / {n // 3} frames", tp_large["rss_mib"] / tp_small["rss_mib"], None)


if __name__ == "__main__":
    main()
