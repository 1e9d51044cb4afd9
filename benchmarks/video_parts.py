"""Video decode and encode speeds of the io layer's building blocks, side by side.

Decode-only rates on bigbuckbunny (720p H.264, 132 frames, ``thread_type="AUTO"``):
no colour conversion, PyAV's ``to_ndarray(format="rgb24")`` (swscale), OpenCV's
``cvtColor(COLOR_YUV2RGB_I420)`` on the 4:2:0 planes, and :class:`VideoSource`
(which picks the OpenCV path for such input). Encode-only rates of the same frames,
held in memory, with :class:`VideoSink`: libx264 ultrafast and veryfast, and ffv1.
Decode rates are the best of ``--repeats`` runs, encode rates of one fewer; ratios
are against the first row of each table.

Run:  python benchmarks/video_parts.py [--repeats 3]   (about 40 s on 2 cores)
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import av
import cv2
import numpy as np

from clips import clip_folder  # this folder's helper: the real clips
from hyperframes.frames import FrameSpec
from hyperframes.io.video import VideoSource
from hyperframes.io.video_sink import VideoSink


def clip() -> Path:
    return clip_folder() / "bigbuckbunny.mp4"


def decode_pyav(path: Path, convert: Callable[[av.VideoFrame, np.ndarray], None]) -> int:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        stream.thread_type = "AUTO"
        out = np.empty((stream.height, stream.width, 3), np.uint8)
        count = 0
        for frame in container.decode(stream):
            convert(frame, out)
            count += 1
    return count


def decode_source(path: Path) -> int:
    source = VideoSource(path)
    out = np.empty((32, *source.spec.shape), np.uint8)
    count = 0
    with source:
        while n := len(source.read_into(out)):
            count += n
    return count


def encode(frames: np.ndarray, folder: Path, name: str, **kwargs: Any) -> int:
    sink = VideoSink(folder / name, overwrite=True, **kwargs)
    sink.open(FrameSpec(frames.shape[1:]), {"rate": "25"})
    for start in range(0, len(frames), 32):
        sink.write(frames[start : start + 32], np.arange(start, min(start + 32, len(frames))), {})
    sink.close(ok=True)
    return len(frames)


def best_rates(works: list[tuple[str, Callable[[], int]]], repeats: int) -> list[tuple[str, float]]:
    """The best rate of each work over ``repeats`` rounds; rounds interleave the works so
    that a load change on the machine hits all of them alike."""
    best = dict.fromkeys((name for name, _ in works), 0.0)
    for _ in range(repeats):
        for name, work in works:
            start = time.perf_counter()
            count = work()
            best[name] = max(best[name], count / (time.perf_counter() - start))
    return list(best.items())


def table(title: str, rows: list[tuple[str, float]]) -> None:
    print(f"\n{title}\n| what | fps | ratio |\n| --- | ---: | ---: |")
    for name, rate in rows:
        print(f"| {name} | {rate:.0f} | {rate / rows[0][1]:.2f}x |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    path = clip()

    def swscale(frame: av.VideoFrame, out: np.ndarray) -> None:
        out[...] = frame.to_ndarray(format="rgb24")

    def opencv(frame: av.VideoFrame, out: np.ndarray) -> None:
        cv2.cvtColor(frame.to_ndarray(), cv2.COLOR_YUV2RGB_I420, dst=out)

    decode = [
        ("decode only, no conversion", lambda: decode_pyav(path, lambda f, o: None)),
        ('to_ndarray(format="rgb24") (swscale)', lambda: decode_pyav(path, swscale)),
        ("yuv420p planes + cv2.cvtColor I420", lambda: decode_pyav(path, opencv)),
        ("VideoSource rgb24 (batches of 32)", lambda: decode_source(path)),
    ]
    table(
        f"Decode {path.name} 1280x720, {cv2.getNumberOfCPUs()} CPUs",
        best_rates(decode, args.repeats),
    )

    source = VideoSource(path)
    frames = np.empty((source.length or 132, *source.spec.shape), np.uint8)
    with source:
        frames = frames[: len(source.read_into(frames))]
    with tempfile.TemporaryDirectory() as folder:
        out = Path(folder)
        encoders = [
            ("libx264 ultrafast", lambda: encode(frames, out, "u.mp4", preset="ultrafast")),
            ("libx264 veryfast", lambda: encode(frames, out, "v.mp4", preset="veryfast")),
            ("ffv1 (lossless, bgr0)", lambda: encode(frames, out, "f.mkv", codec="ffv1")),
        ]
        table(
            f"Encode {len(frames)} frames 1280x720 RGB from memory",
            best_rates(encoders, max(1, args.repeats - 1)),
        )


if __name__ == "__main__":
    main()
