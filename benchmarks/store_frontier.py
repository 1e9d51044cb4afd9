"""The store on the lossless frontier: every mode of ours against FFmpeg's lossless coders
(issue 29), size against random-access time, side by side in one run.

For each clip the decoder's yuv420p planes are read into memory once; then each method
codes them, and the same ``--reads`` random frames are read back as RGB from every method
in turn (the store with its caches off, every read decodes; a file: seek + decode + the same
RGB conversion):

- ours: ``pack``'s path (``ArraySource`` tagged as ``VideoSource`` tags it -> ``.group()``
  -> ``StoreSink``) with ``intra=gradient`` (the default), ``ffv1``, and ``x264`` at
  ``gop=8`` and ``gop=32``, grouped as ``pack`` groups them (x264: by length only, whole
  GOPs);
- anchors, in Matroska (UT Video, MagicYUV, FFVHuff: AVI, which PyAV's Matroska muxer
  refuses them for): FFV1 (FFmpeg's defaults: Golomb-Rice, GOP 300), FFV1 with its
  range coder, FFV1 ``g=1``, UT Video, MagicYUV, FFVHuff, and lossless x264 (qp 0, the same
  preset and options as the store's: no B-frames, fixed keyframes) intra-only, GOP 8 and
  GOP 32.

Per method: bytes / FFV1's, the median random access (ms), pack fps (coding from memory,
the whole packing call), and whether the planes read back bit-exact. A method is
*dominated* on a clip when another is at most its size and at most its access time (and
strictly better in one). Per clip the plot (``--plot DIR``) draws size against access
time, log-scaled, the frontier (the methods no other dominates) as a step line.

Clips: bikes, goldeneye-vfr-drop3, bigbuckbunny, testvideo (PySceneDetect's resources,
skipped when absent), a 1080p upscale of bigbuckbunny and a 640x360 one with film grain
(see ``store_planes.make_clip``).

Run: ``python benchmarks/store_frontier.py [--frames N] [--reads 20] [--clips a,b]
[--plot DIR] [--json FILE]``.

Goals (issue 29): no anchor dominates any of our modes on any clip; ``x264`` within 1.05x
lossless x264's size at the same GOP, its random access no slower than x264's own seek +
decode at that GOP, its pack >= 0.8x libx264's encoding speed alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import av
import numpy as np

from hyperframes import Pipeline
from hyperframes.cli.store import x264_max_len
from hyperframes.engine.sizing import default_budget
from hyperframes.hyper.codec._x264 import x264_options
from hyperframes.io.arrays import ArraySource
from hyperframes.io.layouts import Layout
from hyperframes.store import FrameStore, StoreSink
from hyperframes.store.sink import plan_pack
from store_planes import clips, file_reader, load, write_planes  # this folder's helpers

Packed = tuple[float, int, Callable[[int], np.ndarray], Callable[[], None], bool]
"""(pack seconds, bytes, read(i) -> RGB, close, planes bit-exact)."""


def store(intra: str, gop: int | None = None) -> Callable[[np.ndarray, dict, Path], Packed]:
    def run(frames: np.ndarray, info: dict, folder: Path) -> Packed:
        path = folder / "clip.hfs"
        source = ArraySource(frames)
        source.info.update(info, frames=len(frames))
        grouping = {}
        if gop:  # as pack groups them: by length only, the longest its memory plan allows
            spec = source.spec
            longest = plan_pack(spec, default_budget(), min_len=2).max_len
            grouping = {"threshold": 1.0, "max_len": x264_max_len(longest, gop)}
        t = time.perf_counter()
        sink = StoreSink(path, intra=intra, gop=gop)
        Pipeline.from_source(source, batch_size=16).group(**grouping).to(sink).run()
        wall = time.perf_counter() - t
        size = (path / "data.mdb").stat().st_size
        with FrameStore(path, pix_fmt="native", hot_bytes=0, read_ahead=False) as planes:
            exact = bool(np.array_equal(planes[:], frames))
        reader = FrameStore(path, hot_bytes=0, warm_bytes=0, read_ahead=False)
        return wall, size, reader.get_frame_at, reader.close, exact

    return run


def anchor(codec: str, options: dict[str, str] | None = None) -> Callable[..., Packed]:
    def run(frames: np.ndarray, info: dict, folder: Path) -> Packed:
        layout = Layout.of(info["layout"], info["width"], info["height"])
        tags = {k: info[k] for k in ("colorspace", "color_range") if k in info}
        path = folder / f"{codec}.{'mkv' if codec in ('ffv1', X264) else 'avi'}"
        t = time.perf_counter()
        write_planes(path, codec, options or {}, frames, layout)
        wall = time.perf_counter() - t
        read, close = file_reader(path, layout, tags)
        exact = _exact_file(path, frames, layout)
        return wall, path.stat().st_size, read, close, exact

    return run


def _exact_file(path: Path, frames: np.ndarray, layout: Layout) -> bool:
    scratch = np.empty(layout.shape, layout.dtype)
    with av.open(str(path)) as container:
        n = 0
        for n, frame in enumerate(container.decode(video=0), 1):
            layout.read(frame, scratch)
            if n > len(frames) or not np.array_equal(scratch, frames[n - 1]):
                return False
    return n == len(frames)


X264 = "libx264"
METHODS: dict[str, Callable[..., Packed]] = {
    "store gradient": store("gradient"),
    "store ffv1": store("ffv1"),
    "store x264 g8": store("x264", 8),
    "store x264 g32": store("x264", 32),
    "ffv1": anchor("ffv1"),
    "ffv1 range": anchor("ffv1", {"coder": "1"}),
    "ffv1 g=1": anchor("ffv1", {"g": "1"}),
    "utvideo": anchor("utvideo"),
    "magicyuv": anchor("magicyuv"),
    "ffvhuff": anchor("ffvhuff"),
    "x264 intra": anchor(X264, x264_options(1)),
    "x264 g8": anchor(X264, x264_options(8)),
    "x264 g32": anchor(X264, x264_options(32)),
}


def measure(frames: np.ndarray, info: dict, reads: int, seed: int) -> dict[str, dict[str, float]]:
    """Pack with every method, then read the same random frames from all of them in turn
    (each pick goes round every method, in a rotating order, so that the machine's load
    drifting over the run falls on all of them alike)."""
    picks = np.random.default_rng(seed).integers(0, len(frames), reads).tolist()
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        packed = {}
        for name, method in METHODS.items():
            folder = Path(tmp) / name.replace(" ", "_")
            folder.mkdir()
            packed[name] = method(frames, info, folder)
        names = list(packed)
        times: dict[str, list[float]] = {name: [] for name in names}
        try:
            for k, i in enumerate(picks):
                for name in names[k % len(names) :] + names[: k % len(names)]:
                    t = time.perf_counter()
                    packed[name][2](i)
                    times[name].append(time.perf_counter() - t)
        finally:
            for packing in packed.values():
                packing[3]()  # close
        for name, (wall, size, _, _, exact) in packed.items():
            out[name] = {
                "bytes": size,
                "pack_fps": len(frames) / wall,
                "access_ms": 1e3 * statistics.median(times[name]),
                "exact": float(exact),
            }
    return out


def dominated(r: dict[str, dict[str, float]], name: str) -> list[str]:
    """The methods that dominate ``name``: no larger, no slower, and better in one."""
    me = r[name]
    return [
        other
        for other, o in r.items()
        if other != name
        and o["bytes"] <= me["bytes"]
        and o["access_ms"] <= me["access_ms"]
        and (o["bytes"] < me["bytes"] or o["access_ms"] < me["access_ms"])
    ]


def plot(results: dict[str, dict[str, dict[str, float]]], folder: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import NullFormatter, ScalarFormatter

    n = len(results)
    cols = min(3, n)
    rows = -(-n // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(5.2 * cols, 4.2 * rows), squeeze=False)
    for ax, (clip, r) in zip(axes.flat, results.items(), strict=False):
        base = r["ffv1"]["bytes"]
        for name, m in r.items():
            ours = name.startswith("store")
            ax.scatter(m["access_ms"], m["bytes"] / base, marker="o" if ours else "x",
                       color="tab:blue" if ours else "tab:gray", zorder=3)  # fmt: skip
            ax.annotate(name.removeprefix("store "), (m["access_ms"], m["bytes"] / base),
                        fontsize=7, xytext=(3, 3), textcoords="offset points",
                        color="tab:blue" if ours else "black")  # fmt: skip
        front = sorted((m["access_ms"], m["bytes"] / base) for k, m in r.items()
                       if not dominated(r, k))  # fmt: skip
        ax.step([x for x, _ in front], [y for _, y in front], where="post", color="tab:red",
                lw=1, label="frontier")  # fmt: skip
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(ScalarFormatter())
        ax.yaxis.set_minor_formatter(ScalarFormatter())
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.scatter([], [], marker="o", color="tab:blue", label="the store (ours)")
        ax.scatter([], [], marker="x", color="tab:gray", label="FFmpeg's coders")
        ax.legend(fontsize=7, loc="upper right")
        ax.set_title(clip, fontsize=10)
        ax.set_xlabel("random access, ms (median)")
        ax.set_ylabel("size / FFV1")
        ax.grid(True, which="both", lw=0.3)
    for ax in list(axes.flat)[n:]:
        ax.axis("off")
    fig.tight_layout()
    folder.mkdir(parents=True, exist_ok=True)
    out = folder / "store_frontier.png"
    fig.savefig(out, dpi=110)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=None, help="cap frames per clip")
    parser.add_argument("--reads", type=int, default=20, help="random reads per method")
    parser.add_argument("--clips", default=None, help="comma-separated clip names")
    parser.add_argument("--plot", type=Path, default=None, help="folder for the plot")
    parser.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = parser.parse_args()
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        chosen = clips(Path(tmp), args.frames)
        if args.clips:
            chosen = {k: v for k, v in chosen.items() if k in args.clips.split(",")}
        for clip, (path, count) in chosen.items():
            frames, info = load(path, count)
            print(f"\n{clip}: {len(frames)} frames {info['width']}x{info['height']} "
                  f"{info['layout']}", flush=True)  # fmt: skip
            r = results[clip] = measure(frames, info, args.reads, seed=len(frames))
            print(f"{'method':<16}{'size/FFV1':>10}{'access ms':>11}{'pack fps':>10}"
                  f"{'exact':>7}  dominated by")  # fmt: skip
            for name, m in r.items():
                print(f"{name:<16}{m['bytes'] / r['ffv1']['bytes']:>10.3f}{m['access_ms']:>11.1f}"
                      f"{m['pack_fps']:>10.1f}{'yes' if m['exact'] else 'NO':>7}  "
                      f"{', '.join(dominated(r, name)) or '-'}")  # fmt: skip
    print("\n## Goals")
    ours = [m for m in METHODS if m.startswith("store")]
    beaten = [(c, m, dominated(r, m)) for c, r in results.items() for m in ours]
    by_anchor = [(c, m, [d for d in ds if not d.startswith("store")]) for c, m, ds in beaten]
    print("no anchor dominates any of our modes:", all(not ds for _, _, ds in by_anchor))
    for c, m, ds in by_anchor:
        if ds:
            print(f"  {c}: {m} dominated by {', '.join(ds)}")
    for gop in (8, 32):
        mine, theirs = f"store x264 g{gop}", f"x264 g{gop}"
        for c, r in results.items():
            a, b = r[mine], r[theirs]
            print(f"{c:<14} GOP {gop:>2}: size {a['bytes'] / b['bytes']:.3f}x x264's (<= 1.05), "
                  f"access {a['access_ms']:.1f} vs {b['access_ms']:.1f} ms "
                  f"({a['access_ms'] / b['access_ms']:.2f}x, <= 1), pack "
                  f"{a['pack_fps'] / b['pack_fps']:.2f}x libx264's fps (>= 0.8)")  # fmt: skip
    if args.plot:
        print("plot:", plot(results, args.plot))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
