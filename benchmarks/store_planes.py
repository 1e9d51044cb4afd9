"""The store of a video's native planes against FFV1 coding the same planes (issue 18).

For each clip the decoder's yuv420p planes are read into memory once; then, side by side
in one run:

- ``ffv1``: FFV1 with FFmpeg's default settings (default GOP) on the planes, in Matroska:
  the size anchor and the pack-speed anchor (encoding from memory to the file).
- ``ffv1 g=1``: the same with every frame a keyframe: the random-access anchor (seek,
  decode, and the same RGB conversion the store does).
- ``store``: ``pack``'s path, ``ArraySource`` of the planes tagged as ``VideoSource``
  tags them -> ``.group()`` -> ``StoreSink`` (lossless), with raw records coded by the
  gradient + zstd (``intra=gradient``) or as FFV1 keyframes (``intra=ffv1``).

Random access: the median (and max) of ``--reads`` random frames, delivered as RGB, on a
freshly opened store with its caches off (``hot_bytes=0, warm_bytes=0``; every read
decodes) and on an open FFV1 file. Bit-exact: every stored frame read back as planes
equals the decoder's.

Beside wall time, the process's CPU time (all threads) per packed frame and per read: on
a shared machine the wall-time ratios move with other jobs' load (the store packs groups
on 2 threads and decodes FFV1 slices on 2; the FFV1 anchors use one core), the CPU ratios
much less. ``--coders`` adds what-if stores whose FFV1 records all use FFV1's Golomb-Rice
coder (FFmpeg's default, the anchors' coder) or all its range coder, instead of the
choice per group.

Clips: bikes, goldeneye-vfr-drop3, bigbuckbunny, testvideo (PySceneDetect's resources,
skipped when absent: ``HF_SCENE_RESOURCES`` or ``/work/shared/pyscenedetect_resources``),
and two made here from bigbuckbunny: a 1080p upscale and a 640x360 one with film grain
(Gaussian noise, sigma 6 on Y and 3 on chroma), both x264 crf 8.

Run: ``python benchmarks/store_planes.py [--frames N] [--reads 20] [--clips a,b] [--coders]``.

Targets (issue 18): size / FFV1 <= 1.0 on every clip; random access <= 0.5x FFV1 g=1 on
the median clip and <= 1.0x on every clip; pack fps >= FFV1's; planes bit-exact.
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
import numpy as np

from clips import clip_folder, scene_folder  # this folder's helper
from hyperframes import Pipeline
from hyperframes.hyper.codec import _planes
from hyperframes.io.arrays import ArraySource
from hyperframes.io.layouts import Layout, to_rgb
from hyperframes.io.video import VideoSource
from hyperframes.store import FrameStore, StoreSink

Reader = Callable[[int], np.ndarray]


def make_clip(src: Path, out: Path, size: tuple[int, int], grain: float, count: int) -> Path:
    """``count`` frames of ``src`` resized to ``size``, with Gaussian grain, as x264 crf 8."""
    rng = np.random.default_rng(18)
    w, h = size
    with av.open(str(src)) as inp, av.open(str(out), "w") as dst:
        stream = dst.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = w, h, "yuv420p"
        stream.options = {"crf": "8", "preset": "veryfast"}
        for i, frame in enumerate(inp.decode(video=0)):
            if i >= count:
                break
            small = frame.reformat(width=w, height=h, format="yuv420p", interpolation="BICUBIC")
            if grain:
                layout = Layout.of("yuv420p", w, h)
                planes = small.to_ndarray()
                for k, plane in enumerate(layout.planes(planes)):
                    noise = rng.normal(0, grain if k == 0 else grain / 2, plane.shape)
                    plane[...] = np.clip(plane + noise, 0, 255).astype(np.uint8)
                small = av.VideoFrame.from_ndarray(planes, format="yuv420p")
            small.pts = i
            dst.mux(stream.encode(small))
        dst.mux(stream.encode(None))
    return out


def load(path: Path, count: int) -> tuple[np.ndarray, dict]:
    source = VideoSource(path, pix_fmt="native", stop=count)
    out = np.empty((count, *source.spec.shape), source.spec.dtype)
    n = len(source.read_into(out))
    source.close()
    return out[:n], dict(source.info)


def pack_store(intra: str, patch: dict[str, object] | None = None) -> Callable[..., tuple]:
    def run(
        frames: np.ndarray, info: dict, folder: Path
    ) -> tuple[float, float, int, Reader, Callable[[], None]]:
        path = folder / "clip.hfs"
        source = ArraySource(frames)
        source.info.update(info, frames=len(frames))
        kept = {k: getattr(_planes, k) for k in patch or {}}
        for k, v in (patch or {}).items():  # a what-if: other settings of the planar codec
            setattr(_planes, k, v)
        t, c = time.perf_counter(), time.process_time()
        try:
            sink = StoreSink(path, intra=intra)
            Pipeline.from_source(source, batch_size=16).group().to(sink).run()
        finally:
            for k, v in kept.items():
                setattr(_planes, k, v)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        size = (path / "data.mdb").stat().st_size
        store = FrameStore(path, hot_bytes=0, warm_bytes=0, read_ahead=False)
        with FrameStore(path, pix_fmt="native", hot_bytes=0, read_ahead=False) as planes:
            exact = np.array_equal(planes[:], frames)
        run.exact = exact  # type: ignore[attr-defined]
        return wall, cpu, size, store.get_frame_at, store.close

    return run


def write_planes(path: Path, codec: str, options: dict[str, str], frames: np.ndarray,
                 layout: Layout) -> None:  # fmt: skip
    """Code ``frames`` (planes of ``layout``) with ``codec`` into the file at ``path``."""
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = layout.width, layout.height, "yuv420p"
        stream.options = dict(options)
        for i, frame in enumerate(frames):
            video_frame = layout.to_frame(frame)
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))


def file_reader(path: Path, layout: Layout, tags: dict) -> tuple[Reader, Callable[[], None]]:
    """Frame ``i`` of the file at ``path`` as RGB, by seek and decode (as the store converts
    its planes), and the call that closes the file."""
    container = av.open(str(path))
    vstream = container.streams.video[0]
    scratch = np.empty(layout.shape, layout.dtype)

    def read(i: int) -> np.ndarray:
        target = i / 25
        container.seek(round(target / vstream.time_base), stream=vstream, backward=True)
        for frame in container.decode(vstream):
            if frame.time is not None and frame.time >= target - 1e-3:
                layout.read(frame, scratch)
                return to_rgb(scratch, layout, tags)
        raise RuntimeError(f"frame {i} not found")

    return read, container.close


def pack_ffv1(options: dict[str, str]) -> Callable[..., tuple]:
    def run(
        frames: np.ndarray, info: dict, folder: Path
    ) -> tuple[float, float, int, Reader, Callable[[], None]]:
        layout = Layout.of(info["layout"], info["width"], info["height"])
        tags = {k: info[k] for k in ("colorspace", "color_range") if k in info}
        path = folder / f"ffv1-{len(options)}.mkv"
        t, c = time.perf_counter(), time.process_time()
        write_planes(path, "ffv1", options, frames, layout)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        read, close = file_reader(path, layout, tags)
        run.exact = True  # type: ignore[attr-defined]
        return wall, cpu, path.stat().st_size, read, close

    return run


METHODS = {
    "ffv1": pack_ffv1({}),
    "ffv1 g=1": pack_ffv1({"g": "1"}),
    "store gradient": pack_store("gradient"),
    "store ffv1": pack_store("ffv1"),
}


def measure(frames: np.ndarray, info: dict, reads: int, seed: int) -> dict[str, dict[str, float]]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(frames), reads).tolist()
    out: dict[str, dict[str, float]] = {}
    for name, method in METHODS.items():
        with tempfile.TemporaryDirectory() as tmp:
            wall, cpu, size, read, close = method(frames, info, Path(tmp))
            times, cpus = [], []
            try:
                for i in picks:
                    t, c = time.perf_counter(), time.process_time()
                    read(i)
                    times.append(time.perf_counter() - t)
                    cpus.append(time.process_time() - c)
            finally:
                close()
        out[name] = {
            "size": size,
            "pack_fps": len(frames) / wall,
            "pack_cpu": cpu / len(frames),
            "cpu_ms": 1e3 * statistics.median(cpus),
            "median_ms": 1e3 * statistics.median(times),
            "max_ms": 1e3 * max(times),
            "exact": float(method.exact),  # type: ignore[attr-defined]
        }
    return out


def clips(tmp: Path, frames: int | None) -> dict[str, tuple[Path, int]]:
    sk, scenes = clip_folder(), scene_folder()
    out = {"bikes": (sk / "bikes.mp4", 120)}
    if (scenes / "goldeneye-vfr-drop3.mp4").exists():
        out["goldeneye"] = (scenes / "goldeneye-vfr-drop3.mp4", 120)
    out["bigbuckbunny"] = (sk / "bigbuckbunny.mp4", 60)
    if (scenes / "testvideo.mp4").exists():
        out["testvideo"] = (scenes / "testvideo.mp4", 240)
    bbb = sk / "bigbuckbunny.mp4"
    out["bbb 1080p"] = (make_clip(bbb, tmp / "bbb1080.mp4", (1920, 1080), 0, 40), 40)
    out["grain 360p"] = (make_clip(bbb, tmp / "grain.mp4", (640, 360), 6.0, 120), 120)
    return {k: (p, frames or n) for k, (p, n) in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=None, help="cap frames per clip")
    parser.add_argument("--reads", type=int, default=20, help="random reads per method")
    parser.add_argument("--clips", default=None, help="comma-separated clip names")
    parser.add_argument(
        "--coders", action="store_true",
        help="also what-if stores whose FFV1 records all use one coder (golomb, range)",
    )  # fmt: skip
    args = parser.parse_args()
    if args.coders:
        METHODS["store ffv1 golomb"] = pack_store("ffv1", {"RANGE_GAIN": 2.0})
        METHODS["store ffv1 range"] = pack_store("ffv1", {"RANGE_GAIN": -1e9})
    stores = [m for m in METHODS if m.startswith("store")]
    rows: list[tuple] = []
    with tempfile.TemporaryDirectory() as tmp:
        chosen = clips(Path(tmp), args.frames)
        if args.clips:
            chosen = {k: v for k, v in chosen.items() if k in args.clips.split(",")}
        for name, (path, count) in chosen.items():
            frames, info = load(path, count)
            w, h = info["width"], info["height"]
            print(f"\n{name}: {len(frames)} frames {w}x{h} {info['layout']}")
            print(f"{'method':<18}{'MB':>8}{'pack fps':>10}{'pack CPU ms':>13}{'RA med ms':>11}"
                  f"{'RA CPU ms':>11}{'RA max':>9}{'exact':>7}")  # fmt: skip
            r = measure(frames, info, args.reads, seed=len(frames))
            for method, m in r.items():
                print(f"{method:<18}{m['size'] / 1e6:>8.2f}{m['pack_fps']:>10.1f}"
                      f"{1e3 * m['pack_cpu']:>13.2f}{m['median_ms']:>11.2f}{m['cpu_ms']:>11.2f}"
                      f"{m['max_ms']:>9.2f}{'yes' if m['exact'] else 'NO':>7}")  # fmt: skip
            f, g1 = r["ffv1"], r["ffv1 g=1"]
            for store in stores:
                s = r[store]
                rows.append((
                    name, store, s["size"] / f["size"], s["median_ms"], g1["median_ms"],
                    s["cpu_ms"] / g1["cpu_ms"], s["pack_fps"] / f["pack_fps"],
                    f["pack_cpu"] / s["pack_cpu"], bool(s["exact"]),
                ))  # fmt: skip
    print("\n| clip | store | size / FFV1 | RA ms store vs FFV1 g=1 (ratio) | RA CPU ratio "
          "| pack fps / FFV1 | pack CPU, FFV1 / store | planes exact |")  # fmt: skip
    print("|---|---|---:|---|---:|---:|---:|---|")
    for name, store, size, ra, ra1, ra_cpu, fps, pack_cpu, exact in rows:
        print(f"| {name} | {store.removeprefix('store ')} | {size:.2f} | {ra:.2f} vs {ra1:.2f} "
              f"({ra / ra1:.2f}) | {ra_cpu:.2f} | {fps:.2f} | {pack_cpu:.2f} | "
              f"{'yes' if exact else 'NO'} |")  # fmt: skip
    for store in stores:
        mine = [r for r in rows if r[1] == store]
        ratios = sorted(r[3] / r[4] for r in mine)
        print(f"\n{store}: size <= 1.0 on every clip: {all(r[2] <= 1.0 for r in mine)} "
              f"(max {max(r[2] for r in mine):.2f}); RA median clip "
              f"{statistics.median(ratios):.2f}x (target <= 0.5), worst {ratios[-1]:.2f}x "
              f"(target <= 1.0; CPU ratios {min(r[5] for r in mine):.2f}-"
              f"{max(r[5] for r in mine):.2f}); pack fps >= FFV1 on every clip: "
              f"{all(r[6] >= 1.0 for r in mine)} (min {min(r[6] for r in mine):.2f}; CPU "
              f"FFV1/store min {min(r[7] for r in mine):.2f}); "
              f"exact: {all(r[8] for r in mine)}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
