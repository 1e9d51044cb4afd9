"""VideoSource's two yuv420p -> rgb24 conversions side by side: how far apart, how fast.

``colour="fast"`` converts BT.601 4:2:0 planes with OpenCV's ``cvtColor(COLOR_YUV2RGB_I420)``;
``colour="ffmpeg"`` with FFmpeg's swscale (:class:`hyperframes.io.swscale.Swscale`, one
context kept), exactly ``frame.to_ndarray(format="rgb24")``, which is timed too. For
bigbuckbunny (720p), bikes (640x272) and bigbuckbunny at 1080p (made once, H.264) this prints
the absolute differences (max, mean, share of channel values off by 0, 1, 2, 3 and more
levels) between the two and between each and the exact BT.601 formula in floating point
(where pixels are off by 4 or more, their luma: all below video black, Y < 16), then the
rates: conversion only (decoded frames held in memory) and the whole VideoSource (decode
and convert, batches of 32), with the ratios to ffmpeg. Rates are the best of
``--repeats`` interleaved rounds.

Run:  python benchmarks/colour.py [--repeats 3]   (about a minute on 2 cores)
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Callable
from functools import partial
from pathlib import Path

import av
import cv2
import numpy as np

from clips import clip_folder, encode_bunny  # this folder's helper: the real clips
from hyperframes.io.swscale import Swscale
from hyperframes.io.video import Colour, VideoSource
from video_parts import best_rates  # this folder's helper: interleaved rounds, best rate

CLIPS = ("bigbuckbunny.mp4", "bikes.mp4")
MADE = Path(tempfile.gettempdir()) / "hyperframes-colour" / "bunny-1080p.mp4"


def clips() -> list[Path]:
    made = encode_bunny(MADE, size=(1920, 1080), frames=264, gop=250)
    return [*(clip_folder() / name for name in CLIPS), made]


def decoded(path: Path) -> list[av.VideoFrame]:
    with av.open(str(path)) as container:
        return list(container.decode(video=0))


def fast(frame: av.VideoFrame, out: np.ndarray) -> None:
    cv2.cvtColor(frame.to_ndarray(), cv2.COLOR_YUV2RGB_I420, dst=out)


ffmpeg = Swscale("rgb24").convert_into


def to_ndarray(frame: av.VideoFrame, out: np.ndarray) -> None:
    out[...] = frame.to_ndarray(format="rgb24")


def bt601(frame: av.VideoFrame) -> np.ndarray:
    """The exact BT.601 limited-range conversion in floating point, rounded, with each
    chroma sample used for its 2x2 pixels (as both paths do): the reference."""
    planes, h, w = frame.to_ndarray(), frame.height, frame.width
    y = 1.164383 * (planes[:h].astype(np.float32) - 16)
    u, v = (
        p.reshape(h // 2, w // 2).repeat(2, 0).repeat(2, 1).astype(np.float32) - 128
        for p in (planes[h : h + h // 4], planes[h + h // 4 :])
    )
    rgb = np.stack([y + 1.596027 * v, y - 0.391762 * u - 0.812968 * v, y + 2.017232 * u], -1)
    return np.clip(np.round(rgb), 0, 255).astype(np.uint8)


class Gaps:
    """A histogram of absolute differences (levels) between two conversions."""

    def __init__(self, name: str) -> None:
        self.name, self.counts = name, np.zeros(256, np.int64)
        self.low_luma: list[int] = []  # the luma of pixels off by 4 or more

    def add(self, a: np.ndarray, b: np.ndarray, luma: np.ndarray) -> None:
        diff = np.abs(a.astype(np.int16) - b).astype(np.uint8)
        self.counts += np.bincount(diff.ravel(), minlength=256)
        self.low_luma.extend(int(v) for v in luma[(diff > 3).any(axis=2)])

    def line(self) -> str:
        total = self.counts.sum()
        mean = float((self.counts * np.arange(256)).sum() / total)
        shares = " ".join(f"{self.counts[k] / total:6.2%}" for k in range(3))
        far = f"{self.counts[3:].sum() / total:7.4%}"
        where, low = "", self.low_luma
        if low:
            where = f" {len(low)} px off by 4+, luma {min(low)}..{max(low)}"
        largest = int(np.nonzero(self.counts)[0].max())
        return f"  | {self.name} | {largest} | {mean:.2f} | {shares} {far} | {where} |"


def differences(frames: list[av.VideoFrame]) -> None:
    gaps = [Gaps("fast vs ffmpeg"), Gaps("fast vs exact BT.601"), Gaps("ffmpeg vs exact BT.601")]
    out_fast = np.empty((frames[0].height, frames[0].width, 3), np.uint8)
    out_ffmpeg = np.empty_like(out_fast)
    for frame in frames:
        fast(frame, out_fast)
        ffmpeg(frame, out_ffmpeg)
        exact, luma = bt601(frame), frame.to_ndarray()[: frame.height]
        gaps[0].add(out_fast, out_ffmpeg, luma)
        gaps[1].add(out_fast, exact, luma)
        gaps[2].add(out_ffmpeg, exact, luma)
    print(
        "  | |difference| | max | mean | share off by 0, 1, 2, 3+ | far off |\n"
        "  | --- | ---: | ---: | --- | --- |"
    )
    for gap in gaps:
        print(gap.line())


def convert_all(frames: list[av.VideoFrame], convert: Callable[..., None]) -> int:
    out = np.empty((frames[0].height, frames[0].width, 3), np.uint8)
    for frame in frames:
        convert(frame, out)
    return len(frames)


def read_all(path: Path, colour: Colour) -> int:
    source = VideoSource(path, colour=colour)
    out = np.empty((32, *source.spec.shape), np.uint8)
    count = 0
    with source:
        while n := len(source.read_into(out)):
            count += n
    return count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    print(f"{cv2.getNumberOfCPUs()} CPUs, PyAV {av.__version__}, OpenCV {cv2.__version__}")
    for path in clips():
        frames = decoded(path)
        print(f"\n{path.name}: {len(frames)} frames {frames[0].width}x{frames[0].height}")
        differences(frames)
        rates = dict(
            best_rates(
                [
                    ("convert fast", partial(convert_all, frames, fast)),
                    ("convert ffmpeg", partial(convert_all, frames, ffmpeg)),
                    ("convert to_ndarray", partial(convert_all, frames, to_ndarray)),
                    ("VideoSource fast", partial(read_all, path, "fast")),
                    ("VideoSource ffmpeg", partial(read_all, path, "ffmpeg")),
                ],
                args.repeats,
            )
        )
        print("  | what | fast fps | ffmpeg fps | fast / ffmpeg | to_ndarray / ffmpeg |\n"
              "  | --- | ---: | ---: | ---: | ---: |")  # fmt: skip
        for what in ("convert", "VideoSource"):
            a, b = rates[f"{what} fast"], rates[f"{what} ffmpeg"]
            c = rates.get(f"{what} to_ndarray")
            last = "" if c is None else f"{c / b:.2f}x"
            print(f"  | {what} | {a:.0f} | {b:.0f} | {a / b:.2f}x | {last} |")


if __name__ == "__main__":
    main()
