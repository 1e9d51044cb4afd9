"""Reading a stored sequence back: the hyperframe store against zarr and a PNG folder
(issue 53), side by side, interleaved, in one run.

Each kind of data is written once by every approach (lossless; the read-back is checked
bit for bit), then read back in interleaved rounds:

* ``store``: ``Pipeline.from_frames(...).group().to(StoreSink)`` (defaults); read in
  order by a pipeline (``StoreSource``, batches of 16: what ``unpack``, the viewer and a
  job over a store do) and by ``for frame in FrameStore(...)``; random frames through a
  ``FrameStore`` opened once, with its cache tiers (defaults: a frame of a group decoded
  before is a hit) and without them (``hot_bytes=0, warm_bytes=0``: every read decodes,
  as zarr's does).
* ``zarr zstd 1``: zarr 3, one frame a chunk, zstd level 3; ``zarr zstd 8`` and
  ``zarr blosc 8``: eight frames a chunk, zstd / blosc-zstd with byte shuffle.
  Read in order a chunk at a time; random frames by ``array[i]``.
* ``png``: a folder of PNG files (OpenCV, its default level); read with ``cv2.imread``.

Data: bigbuckbunny (132 frames of 720p RGB); testvideo (720 frames of 720p RGB, mostly
static; PySceneDetect's clip, skipped when absent); a simulation (``--sim-frames`` frames of
512x512 uint16: waves drifting over a field, with sensor noise). Printed per kind: bytes,
sequential frames/s, a random frame's median ms (``--reads`` frames, the same for every
approach), the first frame after open; then the goals: sequential >= 1.0x zarr's 8-frame
chunks (the faster of zstd and blosc), a random frame <= 1.5x zarr's 1-frame chunks, at
<= 0.5x zarr's 8-frame bytes. For the simulation, also what bounds its bytes from below:
the entropy of its noise alone (what a coder that knew the waves exactly would still have
to store), and FFV1 at its strongest (``--no-bounds`` leaves them out).

Run:  pip install zarr   (3.x)
      python benchmarks/store_read.py [--rounds 3] [--reads 40] [--sim-frames 2000]
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import av
import cv2
import numpy as np

from clips import clip_folder, scene_folder  # this folder's helper: the real clips
from hyperframes import Pipeline
from hyperframes.io.video import VideoSource
from hyperframes.store import FrameStore, StoreSink
from hyperframes.store.source import StoreSource

WORK = Path(tempfile.gettempdir()) / "hyperframes-store-read"
NOISE = 4.0
"""The simulation's sensor noise: Gaussian, this standard deviation in levels."""


def video_frames(path: Path) -> np.ndarray:
    source = VideoSource(path)
    out = np.empty((source.length or 0, *source.spec.shape), np.uint8)
    count = len(source.read_into(out))
    source.close()
    return out[:count]


def simulation(count: int, size: int = 512) -> np.ndarray:
    """Waves drifting over a fixed field, 12 bits of signal in uint16, with sensor noise."""
    rng = np.random.default_rng(7)
    y, x = np.mgrid[0:size, 0:size].astype(np.float32) / size
    field = 900 * np.sin(6 * x) * np.cos(4 * y)
    out = np.empty((count, size, size), np.uint16)
    for t in range(count):
        phase = t / 40
        wave = 600 * np.sin(14 * (x + 0.3 * y) - phase) + 300 * np.cos(9 * y + 0.5 * phase)
        noise = rng.normal(0, NOISE, (size, size))
        out[t] = np.clip(2048 + field + wave + noise, 0, 4095).astype(np.uint16)
    return out


def noise_bits(sigma: float = NOISE) -> float:
    """Bits a pixel that the noise alone holds: the entropy of ``floor(s + noise)`` for a
    known ``s``, averaged over where ``s`` falls between two levels. No lossless coder
    of the frames goes below it, whatever its model of the signal."""

    def entropy(fraction: float) -> float:
        cdf = [0.5 * math.erf((k - fraction) / (sigma * math.sqrt(2))) for k in range(-60, 62)]
        probabilities = [b - a for a, b in itertools.pairwise(cdf) if b > a]
        return -sum(p * math.log2(p) for p in probabilities)

    return statistics.fmean(entropy(f / 64) for f in range(64))


def ffv1_bytes(frames: np.ndarray, folder: Path) -> int:
    """Bytes of ``frames`` (uint16 grey) in FFV1 at its strongest: level 3, the large
    context model, the range coder (checked bit for bit on the way back)."""
    path = folder / "ffv1.mkv"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "gray16le"
        stream.options = {"level": "3", "context": "1", "coder": "range_tab", "slices": "4"}
        for frame in frames:
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="gray16le")))
        container.mux(stream.encode())
    with av.open(str(path)) as container:
        back = np.stack([f.to_ndarray() for f in container.decode(video=0)])
    assert np.array_equal(back, frames), "FFV1 did not give the frames back"
    return os.path.getsize(path)


def print_bounds(frames: np.ndarray, folder: Path, eight: int) -> None:
    """The simulation's bytes against what bounds them from below (``eight``: zarr's
    8-frame bytes, the goal's measure)."""
    floor = noise_bits() * frames.size / 8
    ffv1 = ffv1_bytes(frames, folder)
    print(f"bounds: the noise alone {floor / 1e6:.1f} MB ({noise_bits():.2f} bits a pixel; "
          f"{floor / eight:.2f}x zarr's 8-frame bytes), FFV1 at its strongest "
          f"{ffv1 / 1e6:.1f} MB ({ffv1 / eight:.2f}x)")  # fmt: skip


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


class Approach:
    """One way to hold the frames: ``write`` them, read them ``in_order`` (an iterator of
    arrays, several frames each or one), ``open`` for random reads (a reader and a close)."""

    name = ""

    def write(self, frames: np.ndarray, folder: Path) -> None:
        raise NotImplementedError

    def in_order(self) -> Iterator[np.ndarray]:
        raise NotImplementedError

    def open(self) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        raise NotImplementedError


class Store(Approach):
    def __init__(self, how: str) -> None:
        self.how = how
        cache = "cached" if how == "pipeline" else "uncached"
        self.name = f"store ({how}; random {cache})"

    def write(self, frames: np.ndarray, folder: Path) -> None:
        self.path = folder / "s.hfs"
        Pipeline.from_frames(frames, batch_size=16).group().to(StoreSink(self.path)).run()
        self.bytes = folder_bytes(self.path)

    def in_order(self) -> Iterator[np.ndarray]:
        if self.how == "iterate":
            with FrameStore(self.path) as store:
                yield from store
            return
        for _, batch in Pipeline.from_source(StoreSource(self.path), batch_size=16).iter_batches():
            yield batch

    def open(self) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        if self.how == "pipeline":  # (its random reads: the cache tiers on)
            store = FrameStore(self.path)
        else:  # (its random reads: every read decodes)
            store = FrameStore(self.path, hot_bytes=0, warm_bytes=0)
        return store.get_frame_at, store.close


class Zarr(Approach):
    def __init__(self, codec: str, chunk: int) -> None:
        self.codec, self.chunk = codec, chunk
        self.name = f"zarr {codec} {chunk}"

    def write(self, frames: np.ndarray, folder: Path) -> None:
        import zarr
        from zarr.codecs import BloscCodec, ZstdCodec

        self.path = folder / "z.zarr"
        codec = ZstdCodec(level=3) if self.codec == "zstd" else BloscCodec(cname="zstd", clevel=3)
        array = zarr.create_array(
            store=str(self.path), shape=frames.shape, dtype=frames.dtype,
            chunks=(self.chunk, *frames.shape[1:]), compressors=[codec],
        )  # fmt: skip
        array[:] = frames
        self.length = len(frames)
        self.bytes = folder_bytes(self.path)

    def in_order(self) -> Iterator[np.ndarray]:
        import zarr

        array = zarr.open_array(str(self.path), mode="r")
        for start in range(0, self.length, self.chunk):
            yield array[start : start + self.chunk]

    def open(self) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        import zarr

        array = zarr.open_array(str(self.path), mode="r")
        return (lambda i: array[i]), (lambda: None)


class Png(Approach):
    name = "png"

    def write(self, frames: np.ndarray, folder: Path) -> None:
        self.path = folder / "png"
        self.path.mkdir()
        self.files = [self.path / f"{i:06d}.png" for i in range(len(frames))]
        for frame, file in zip(frames, self.files, strict=True):
            cv2.imwrite(str(file), frame[..., ::-1] if frame.ndim == 3 else frame)
        self.bytes = folder_bytes(self.path)

    def read(self, i: int) -> np.ndarray:
        image = cv2.imread(str(self.files[i]), cv2.IMREAD_UNCHANGED)
        return image[..., ::-1] if image.ndim == 3 else image

    def in_order(self) -> Iterator[np.ndarray]:
        for i in range(len(self.files)):
            yield self.read(i)

    def open(self) -> tuple[Callable[[int], np.ndarray], Callable[[], None]]:
        return self.read, (lambda: None)


def approaches() -> list[Approach]:
    return [Store("pipeline"), Store("iterate"), Zarr("zstd", 1), Zarr("zstd", 8),
            Zarr("blosc", 8), Png()]  # fmt: skip


def read_all(approach: Approach, frames: np.ndarray, check: bool) -> float:
    """Seconds to read every frame in order (checked against ``frames`` when ``check``)."""
    t, at = time.perf_counter(), 0
    for got in approach.in_order():
        many = got if got.ndim == frames.ndim else got[None]
        if check:
            assert np.array_equal(many, frames[at : at + len(many)]), approach.name
        at += len(many)
    assert at == len(frames), (approach.name, at)
    return time.perf_counter() - t


def read_random(approach: Approach, frames: np.ndarray, picks: list[int]) -> tuple[float, float]:
    """(median ms of a random frame, ms of the first frame after open)."""
    t = time.perf_counter()
    read, close = approach.open()
    times = []
    try:
        for k, i in enumerate(picks):
            s = time.perf_counter()
            got = read(i)
            times.append(time.perf_counter() - s)
            if k == 0:
                first = time.perf_counter() - t
            assert np.array_equal(got, frames[i]), (approach.name, i)
    finally:
        close()
    return statistics.median(times) * 1000, first * 1000


def measure(kind: str, frames: np.ndarray, rounds: int, reads: int, bounds: bool) -> None:
    folder = WORK / kind
    shutil.rmtree(folder, ignore_errors=True)
    every = approaches()
    for approach in every:
        made = folder / approach.name.replace(" ", "_").replace("(", "").replace(")", "")
        made.mkdir(parents=True)
        approach.write(frames, made)
        read_all(approach, frames, check=True)
    picks = np.random.default_rng(3).integers(0, len(frames), reads).tolist()
    seq: dict[str, float] = {}
    rand: dict[str, tuple[float, float]] = {}
    for _ in range(rounds):
        for approach in every:
            wall = read_all(approach, frames, check=False)
            seq[approach.name] = min(seq.get(approach.name, wall), wall)
            got = read_random(approach, frames, picks)
            best = rand.get(approach.name, got)
            rand[approach.name] = (min(best[0], got[0]), min(best[1], got[1]))
    print(f"\n{kind}: {len(frames)} frames of {frames.shape[1:]} {frames.dtype}")
    print("| approach | MB | in order, frames/s | random frame, median ms | first frame ms |")
    print("|---|---:|---:|---:|---:|")
    for approach in every:
        ms, first = rand[approach.name]
        fps = len(frames) / seq[approach.name]
        print(f"| {approach.name} | {approach.bytes / 1e6:.1f} | {fps:.0f} | {ms:.1f} | "
              f"{first:.1f} |")  # fmt: skip
    eight = min(("zarr zstd 8", "zarr blosc 8"), key=lambda n: seq[n])
    sizes = {a.name: a.bytes for a in every}
    piped, iterated = every[0].name, every[1].name
    one = rand["zarr zstd 1"][0]
    print(f"goals: in order {seq[eight] / seq[piped]:.2f}x {eight} through a pipeline, "
          f"{seq[eight] / seq[iterated]:.2f}x iterated (>= 1.0); random "
          f"{rand[piped][0] / one:.2f}x zarr zstd 1 cached, {rand[iterated][0] / one:.2f}x "
          f"uncached (<= 1.5); bytes {sizes[piped] / sizes[eight]:.2f}x {eight} "
          "(<= 0.5)")  # fmt: skip
    if bounds and kind == "simulation":
        print_bounds(frames, folder, sizes[eight])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--reads", type=int, default=40)
    parser.add_argument("--sim-frames", type=int, default=2000)
    parser.add_argument("--only", choices=("bunny", "testvideo", "simulation"))
    parser.add_argument(
        "--no-bounds",
        action="store_true",
        help="leave out the simulation's lower bounds (its noise, FFV1)",
    )
    args = parser.parse_args()
    kinds: dict[str, Callable[[], np.ndarray]] = {
        "bunny": lambda: video_frames(clip_folder() / "bigbuckbunny.mp4"),
        "testvideo": lambda: video_frames(scene_folder() / "testvideo.mp4"),
        "simulation": lambda: simulation(args.sim_frames),
    }
    for kind, frames_of in kinds.items():
        if args.only not in (None, kind):
            continue
        if kind == "testvideo" and not (scene_folder() / "testvideo.mp4").is_file():
            print("\ntestvideo: skipped (PySceneDetect's clips are not here)")
            continue
        measure(kind, frames_of(), args.rounds, args.reads, not args.no_bounds)


if __name__ == "__main__":
    main()
