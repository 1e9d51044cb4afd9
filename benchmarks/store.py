"""The hyperframe store against FFV1, x264 lossless, PNG and zstd per frame, side by side.

For each real clip (frames capped so the run stays near 3 minutes on 2 cores), every
method packs the same decoded RGB frames from memory and then reads the same random
frames back with its file kept open:

- ``store``: ``Pipeline.from_frames(...).group().to(StoreSink)`` (lossless, defaults);
  reads through ``FrameStore`` with the hot and warm tiers off (every read decodes) and
  the default ``decode="auto"`` (a jump decodes only the frame asked for and its
  references). ``store webp``: the same with ``StoreSink(intra="webp")`` (frames stored
  whole are lossless WebP).
- ``ffv1``: FFV1 in Matroska, default GOP; ``ffv1 g=1``: every frame a keyframe.
- ``x264 qp0``: libx264rgb, ``qp=0`` (lossless RGB), default preset.
- ``png``: one OpenCV PNG file per frame; ``zstd``: one zstd-3 blob per frame in LMDB.

Random access: seek to the keyframe at or before the frame, decode forward to it.
Run: ``python benchmarks/store.py [--frames N] [--reads 20]``.

Targets (issue 5): lossless size <= FFV1 (default GOP) on each clip; random-access
median <= 1/3 of FFV1 g=1; pack fps >= FFV1 encode fps.

This compares stores of RGB frames (``pack --pix-fmt rgb24``, or arrays). ``pack`` of a
video now keeps the decoder's planes; ``python benchmarks/store.py --planes [options]``
runs ``benchmarks/store_planes.py``, which measures those stores against FFV1 coding the
same planes (issue 18), on six clips.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
import cv2
import lmdb
import numpy as np
import zstandard

from clips import clip_folder  # this folder's helper
from hyperframes import Pipeline
from hyperframes.io.video import VideoSource
from hyperframes.store import FrameStore, StoreSink

CLIPS = {"bigbuckbunny.mp4": 60, "bikes.mp4": 120, "carphone_pristine.mp4": 120}
Reader = Callable[[int], np.ndarray]


def load(path: Path, count: int) -> np.ndarray:
    source = VideoSource(path, stop=count)
    out = np.empty((count, *source.spec.shape), np.uint8)
    n = len(source.read_into(out))
    source.close()
    return out[:n]


def pack_store(intra: str) -> Callable[..., tuple]:
    def run(frames: np.ndarray, folder: Path) -> tuple[float, int, Reader, Callable[[], None]]:
        path = folder / "clip.hfs"
        t = time.perf_counter()
        sink = StoreSink(path, intra=intra)
        Pipeline.from_frames(frames, batch_size=16).group().to(sink).run()
        wall = time.perf_counter() - t
        size = (path / "data.mdb").stat().st_size
        store = FrameStore(path, hot_bytes=0, warm_bytes=0, read_ahead=False)
        return wall, size, store.get_frame_at, store.close

    return run


def pack_video(codec: str, options: dict[str, str], pix_fmt: str) -> Callable[..., tuple]:
    def run(frames: np.ndarray, folder: Path) -> tuple[float, int, Reader, Callable[[], None]]:
        path = folder / f"{codec}-{len(options)}.mkv"
        t = time.perf_counter()
        with av.open(str(path), "w") as container:
            stream = container.add_stream(codec, rate=25)
            stream.width, stream.height = frames.shape[2], frames.shape[1]
            stream.pix_fmt, stream.options = pix_fmt, dict(options)
            stream.thread_type = "AUTO"
            for i, frame in enumerate(frames):
                video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
                video_frame.pts = i
                container.mux(stream.encode(video_frame))
            container.mux(stream.encode(None))
        wall = time.perf_counter() - t
        container = av.open(str(path))
        vstream = container.streams.video[0]

        def read(i: int) -> np.ndarray:
            target = i / 25
            container.seek(round(target / vstream.time_base), stream=vstream, backward=True)
            for frame in container.decode(vstream):
                if frame.time is not None and frame.time >= target - 1e-3:
                    return frame.to_ndarray(format="rgb24")
            raise RuntimeError(f"frame {i} not found")

        return wall, path.stat().st_size, read, container.close

    return run


def pack_png(frames: np.ndarray, folder: Path) -> tuple[float, int, Reader, Callable[[], None]]:
    t = time.perf_counter()
    for i, frame in enumerate(frames):
        cv2.imwrite(str(folder / f"{i:06d}.png"), cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    wall = time.perf_counter() - t
    size = sum(p.stat().st_size for p in folder.glob("*.png"))

    def read(i: int) -> np.ndarray:
        return cv2.cvtColor(cv2.imread(str(folder / f"{i:06d}.png")), cv2.COLOR_BGR2RGB)

    return wall, size, read, lambda: None


def pack_zstd(frames: np.ndarray, folder: Path) -> tuple[float, int, Reader, Callable[[], None]]:
    env = lmdb.open(str(folder / "zstd"), map_size=8 << 30, readahead=False)
    cctx = zstandard.ZstdCompressor(level=3)
    t = time.perf_counter()
    with env.begin(write=True) as txn:
        for i, frame in enumerate(frames):
            txn.put(i.to_bytes(8, "big"), cctx.compress(frame.tobytes()))
    wall = time.perf_counter() - t
    size = (folder / "zstd" / "data.mdb").stat().st_size
    dctx, shape = zstandard.ZstdDecompressor(), frames.shape[1:]

    def read(i: int) -> np.ndarray:
        with env.begin() as txn:
            return np.frombuffer(dctx.decompress(txn.get(i.to_bytes(8, "big"))), np.uint8).reshape(
                shape
            )

    return wall, size, read, env.close


METHODS = {
    "store": pack_store("gradient"),
    "store webp": pack_store("webp"),
    "ffv1": pack_video("ffv1", {}, "bgr0"),
    "ffv1 g=1": pack_video("ffv1", {"g": "1"}, "bgr0"),
    "x264 qp0": pack_video("libx264rgb", {"qp": "0"}, "rgb24"),
    "png": pack_png,
    "zstd": pack_zstd,
}


def measure(frames: np.ndarray, reads: int, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(frames), reads).tolist()
    out: dict[str, dict[str, float]] = {}
    for name, method in METHODS.items():
        with tempfile.TemporaryDirectory() as tmp:
            wall, size, read, close = method(frames, Path(tmp))
            times, exact = [], True
            try:
                for i in picks:
                    t = time.perf_counter()
                    frame = read(i)
                    times.append(time.perf_counter() - t)
                    exact = exact and np.array_equal(frame, frames[i])
            finally:
                close()
        out[name] = {
            "size_pct": 100 * size / frames.nbytes,
            "pack_fps": len(frames) / wall,
            "median_ms": 1e3 * statistics.median(times),
            "max_ms": 1e3 * max(times),
            "exact": float(exact),
        }
    return out


def main() -> int:
    if "--planes" in sys.argv:
        sys.path.insert(0, str(Path(__file__).parent))
        import store_planes

        sys.argv.remove("--planes")
        return store_planes.main()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=None, help="cap frames per clip")
    parser.add_argument("--reads", type=int, default=20, help="random reads per method")
    args = parser.parse_args()
    folder = clip_folder()
    verdicts: list[str] = []
    for name, cap in CLIPS.items():
        frames = load(folder / name, args.frames or cap)
        h, w = frames.shape[1:3]
        print(f"\n{name}: {len(frames)} frames {w}x{h}, raw {frames.nbytes / 1e6:.0f} MB")
        print(f"{'method':<11}{'size % raw':>11}{'pack fps':>10}{'RA median ms':>14}"
              f"{'RA max ms':>11}{'exact':>7}")  # fmt: skip
        results = measure(frames, args.reads, seed=len(frames))
        for method, r in results.items():
            print(
                f"{method:<11}{r['size_pct']:>10.1f}%{r['pack_fps']:>10.1f}{r['median_ms']:>14.2f}"
                f"{r['max_ms']:>11.2f}{'yes' if r['exact'] else 'NO':>7}"
            )
        f, g1 = results["ffv1"], results["ffv1 g=1"]
        for store in ("store", "store webp"):
            s = results[store]
            checks = [
                ("size <= FFV1", s["size_pct"] <= f["size_pct"], s["size_pct"] / f["size_pct"]),
                ("RA median <= 1/3 FFV1 g=1", s["median_ms"] <= g1["median_ms"] / 3,
                 s["median_ms"] / g1["median_ms"]),
                ("pack fps >= FFV1", s["pack_fps"] >= f["pack_fps"],
                 s["pack_fps"] / f["pack_fps"]),
            ]  # fmt: skip
            for label, ok, ratio in checks:
                held = "held" if ok else "NOT held"
                line = f"{name} {store}: {label}: {store}/reference = {ratio:.2f} -> {held}"
                print("  " + line)
                verdicts.append(line)
    print("\nsummary")
    for line in verdicts:
        print("  " + line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
