"""The design notes' 300-frame test and the grouping defaults, measured.

Run: ``python benchmarks/seed_claims.py [--max-frames 300] [--skip-clips]``

Part 1 builds a synthetic 300-frame, 256x256 RGB uint8 sequence: 100 static
frames, 100 frames panning 0.5 px/frame, 100 frames panning 5 px/frame, over one
textured scene, each frame with its own Gaussian sensor noise (sigma 2 of 255).
The scene is blurred uniform noise (three octaves, Gaussian sigma 1, 4 and 16 px)
plus soft gradients and a few hard-edged rectangles. It streams the frames
through :class:`~hyperframes.hyper.Grouper` and the default codec, keeping only
the frames of open groups, and prints group counts and stored sizes per segment
next to the notes' claims. Part 2 sweeps threshold, min_len and max_len over the
real clips (see ``codec_choices.py``) to pick defaults.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codec_choices import clips, table
from hyperframes.hyper import Grouper, encode_group, group_frames, mse

SIZE = 256
SEGMENTS = (("static", 0.0), ("slow pan 0.5 px", 0.5), ("fast pan 5 px", 5.0))
PER_SEGMENT = 100
NOISE_SIGMA = 2.0
CLAIMS = {"groups": ("2-3", "15-20", "80-90"), "size": (3.0, 40.0, 95.0), "overall": 45.0}
CLAIM_MEMORY_MB = 80.0


def scene(width: int, seed: int = 7) -> np.ndarray:
    """A float32 RGB texture, ``SIZE`` high and ``width`` wide, values 0..255."""
    rng = np.random.default_rng(seed)
    img = np.zeros((SIZE, width, 3), np.float32)
    for sigma, weight in ((1.0, 0.25), (4.0, 0.35), (16.0, 0.4)):
        noise = rng.random((SIZE, width, 3), dtype=np.float32)
        blurred = cv2.GaussianBlur(noise, (0, 0), sigma)
        blurred = (blurred - blurred.mean()) / (blurred.std() + 1e-6)
        img += weight * 40.0 * blurred
    x = np.linspace(0, 1, width, dtype=np.float32)[None, :, None]
    y = np.linspace(0, 1, SIZE, dtype=np.float32)[:, None, None]
    img += 128 + 40 * np.sin(6 * x + np.array([0, 1, 2], np.float32)) * (0.5 + y)
    for _ in range(12):
        x0, y0 = int(rng.integers(0, width - 40)), int(rng.integers(0, SIZE - 40))
        img[y0 : y0 + int(rng.integers(10, 40)), x0 : x0 + int(rng.integers(10, 40))] = (
            rng.random(3) * 255
        )
    return np.clip(img, 0, 255)


def synthetic_frames(seed: int = 11) -> Iterator[tuple[str, np.ndarray]]:
    """The 300 frames, generated one at a time, with their segment name."""
    width = SIZE + int(sum(speed for _, speed in SEGMENTS) * PER_SEGMENT) + 8
    canvas = scene(width)
    rng = np.random.default_rng(seed)
    offset = 0.0
    for name, speed in SEGMENTS:
        for _ in range(PER_SEGMENT):
            shift = np.float32([[1, 0, -offset], [0, 1, 0]])
            view = cv2.warpAffine(canvas, shift, (width, SIZE), flags=cv2.INTER_LINEAR)[:, :SIZE]
            noisy = view + rng.normal(0, NOISE_SIGMA, view.shape).astype(np.float32)
            yield name, np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
            offset += speed


def run_seed(threshold: float, min_len: int, max_len: int) -> list[list[str]]:
    """Stream the synthetic sequence; return the claims table rows."""
    tracemalloc.start()
    grouper = Grouper(threshold=threshold, min_len=min_len, max_len=max_len)
    held: dict[int, np.ndarray] = {}  # frames of groups not yet closed
    segment_of: list[str] = []
    stored = dict.fromkeys((n for n, _ in SEGMENTS), 0.0)
    lossy = {tier: dict.fromkeys((n for n, _ in SEGMENTS), 0.0) for tier in ("psnr", "keyframe")}
    worst_psnr = math.inf
    most_held = 0
    groups = dict.fromkeys((n for n, _ in SEGMENTS), 0)
    frame_bytes = SIZE * SIZE * 3

    def store(spans: list) -> None:
        nonlocal worst_psnr
        for start, stop in spans:
            group = np.stack([held.pop(i) for i in range(start, stop)])
            blob = encode_group(group).data
            groups[segment_of[start]] += 1
            for i in range(start, stop):
                stored[segment_of[i]] += len(blob) / (stop - start)
            for tier, sizes in lossy.items():
                encoded = encode_group(group, tier=tier)  # type: ignore[arg-type]
                if tier == "psnr":
                    worst_psnr = min(worst_psnr, encoded.psnr_min)
                for i in range(start, stop):
                    sizes[segment_of[i]] += len(encoded.data) / (stop - start)

    t0 = time.perf_counter()
    for name, frame in synthetic_frames():
        segment_of.append(name)
        held[len(segment_of) - 1] = frame
        most_held = max(most_held, len(held))
        store(grouper.push(frame))
    store(grouper.finish())
    wall = time.perf_counter() - t0
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rows = []
    for k, (name, _) in enumerate(SEGMENTS):
        size = 100 * stored[name] / (PER_SEGMENT * frame_bytes)
        lo, hi = (int(v) for v in CLAIMS["groups"][k].split("-"))
        ok_groups = _held(lo <= groups[name] <= hi)
        ok_size = _held(size <= CLAIMS["size"][k] * 1.1)
        extra = [f"{100 * lossy[t][name] / (PER_SEGMENT * frame_bytes):.1f}" for t in lossy]
        claim = f"{CLAIMS['size'][k]:g}"
        rows.append([name, str(groups[name]), CLAIMS["groups"][k], ok_groups])
        rows[-1] += [f"{size:.1f}", claim, ok_size, *extra]
    n_bytes = len(segment_of) * frame_bytes
    total = 100 * sum(stored.values()) / n_bytes
    extra = [f"{100 * sum(lossy[t].values()) / n_bytes:.1f}" for t in lossy]
    ok_total = _held(total <= CLAIMS["overall"] * 1.1)
    rows.append(["all 300", str(sum(groups.values())), "-", "-"])
    rows[-1] += [f"{total:.1f}", f"{CLAIMS['overall']:g}", ok_total, *extra]
    mb = peak / 2**20
    rows.append(["peak traced memory", f"{mb:.1f} MB", f"{CLAIM_MEMORY_MB:g} MB"])
    rows[-1] += [_held(mb <= CLAIM_MEMORY_MB), f"raw {n_bytes / 2**20:.1f} MB"]
    rows[-1] += [f"held <= {most_held} frames", f"{wall:.1f} s", f"min {worst_psnr:.1f} dB", "-"]
    return rows


def _held(ok: bool) -> str:
    return "held" if ok else "not held"


def sweep(max_frames: int) -> list[list[str]]:
    """Group counts, lengths, stored size and reuse PSNR per clip and setting."""
    settings = [(t, 2, 60) for t in (3e-4, 1e-3, 3e-3, 1e-2)]
    settings += [(1e-3, 1, 60), (1e-3, 4, 60), (1e-3, 2, 30), (1e-3, 2, 120)]
    rows = []
    for name, frames in clips(max_frames):
        for threshold, min_len, max_len in settings:
            spans = group_frames(frames, threshold=threshold, min_len=min_len, max_len=max_len)
            size = sum(len(encode_group(frames[a:b]).data) for a, b in spans)
            reuse = []  # PSNR of each frame against its group's base (ReuseByHyperframe)
            for a, b in spans:
                base = frames[(a + b) // 2]
                reuse += [mse(base, frames[i]) for i in range(a, b)]
            worst = max(reuse)
            mean_err = statistics.mean(reuse)
            rows.append(
                [
                    name,
                    f"{threshold:g}",
                    str(min_len),
                    str(max_len),
                    str(len(spans)),
                    f"{len(frames) / len(spans):.1f}",
                    f"{100 * size / frames.nbytes:.1f}",
                    f"{_db(worst):.1f}",
                    f"{_db(mean_err):.1f}",
                ]
            )
            print(*rows[-1], flush=True)
    return rows


def _db(err: float) -> float:
    return math.inf if err == 0 else -10 * math.log10(err)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threshold", type=float, default=1e-3)
    parser.add_argument("--min-len", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=60)
    parser.add_argument("--max-frames", type=int, default=300)
    parser.add_argument("--skip-clips", action="store_true")
    args = parser.parse_args()
    print(
        f"\n### Seed claims: 300 frames 256x256 RGB, noise sigma {NOISE_SIGMA:g}; "
        f"threshold {args.threshold:g}, min_len {args.min_len}, max_len {args.max_len}\n"
    )
    rows = run_seed(args.threshold, args.min_len, args.max_len)
    print(
        table(
            [
                "segment",
                "groups",
                "claim",
                "",
                "lossless % raw",
                "claim %",
                "",
                "psnr-45 % raw",
                "keyframe % raw",
            ],
            rows,
        )
    )
    if not args.skip_clips:
        rows = sweep(args.max_frames)
        print("\n### Grouping settings on real clips (default codec, zstd 3)\n")
        print(
            table(
                [
                    "clip",
                    "threshold",
                    "min_len",
                    "max_len",
                    "groups",
                    "mean len",
                    "stored % raw",
                    "reuse PSNR worst",
                    "reuse PSNR mean",
                ],
                rows,
            )
        )


if __name__ == "__main__":
    main()
