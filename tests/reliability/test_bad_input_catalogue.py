"""The bad-input catalogue: every case gives one clear line, a non-zero exit, nothing half-written.

Each case builds its inputs in a fresh folder (``in/``) and runs ``hyperframes`` in this
process through :func:`hyperframes.cli.main`, writing into ``out/``. A few cases have no
command-line form (a stage that returns the wrong batch length, NaN frames, an image
pattern that leaves its folder); they call the library and report the error the way the
CLI does (:func:`hyperframes.cli.common.fail`). A case either fails, with exactly one
line on stderr starting ``hyperframes: error:`` and exit 1 (or an argparse usage error,
exit 2), or is marked ``works`` (VFR input, 16-bit input, non-contiguous frames, reading
while another process writes) and must succeed. Either way ``out/`` must hold exactly
what it held before, plus the complete output of a case that works.

The table in ``docs/bad-input.md`` comes from the same list:
``python tests/reliability/test_bad_input_catalogue.py --table > docs/bad-input.md``.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import av
import lmdb
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.cli.common import fail
from hyperframes.store import StoreWriter
from hyperframes.store import format as fmt

# -- building inputs ----------------------------------------------------------------------


def write_video(
    path: Path, frames: np.ndarray, *, codec: str = "ffv1", pix_fmt: str = "bgr0",
    fmt_in: str = "rgb24", pts: list[int] | None = None,
) -> Path:  # fmt: skip
    with av.open(str(path), "w") as container:
        stream = container.add_stream(codec, rate=25)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], pix_fmt
        for i, frame in enumerate(frames):
            video_frame = av.VideoFrame.from_ndarray(frame, format=fmt_in)
            video_frame.pts = i if pts is None else pts[i]
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


def noise(count: int, height: int = 32, width: int = 48, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (count, height, width, 3), np.uint8)


def clip(d: Path) -> Path:
    return write_video(d / "clip.mkv", noise(24))


def h264(d: Path) -> Path:
    return write_video(d / "noisy.mp4", noise(40), codec="libx264", pix_fmt="yuv420p")


def store(d: Path, name: str = "s.hfs") -> Path:
    path = d / name
    frames = noise(12, 8, 10)
    with StoreWriter(path, hf.FrameSpec((8, 10, 3)), {"fps": 25.0}, workers=1) as writer:
        for a, b in ((0, 4), (4, 8), (8, 12)):
            writer.write_group(frames[a:b])
    return path


def stores(d: Path) -> Path:
    """A folder of two stores (what ``pack INPUTS OUTDIR`` makes)."""
    folder = d / "stores"
    folder.mkdir()
    store(folder, "a.hfs"), store(folder, "b.hfs")
    return folder


def put(path: Path, key: bytes, value: bytes, db: bytes | None = None) -> None:
    """Overwrite one value of a store behind the library's back (damage)."""
    env = lmdb.open(str(path), subdir=True, max_dbs=2)
    with env.begin(write=True) as txn:
        txn.put(key, value, db=None if db is None else env.open_db(db, txn=txn))
    env.close()


def get(path: Path, key: bytes, db: bytes | None = None) -> bytes:
    env = lmdb.open(str(path), subdir=True, max_dbs=2, readonly=True, lock=False)
    with env.begin() as txn:
        value = bytes(txn.get(key, db=None if db is None else env.open_db(db, txn=txn)))
    env.close()
    return value


def header_with(path: Path, **changes: Any) -> Path:
    head = fmt.parse_header(get(path, fmt.HEADER_KEY)).to_json()
    head.update(changes)
    put(path, fmt.HEADER_KEY, fmt.dump_json(head))
    return path


def module(d: Path, name: str, body: str) -> str:
    """Write ``d/name.py`` with a render function ``frame(i)``; returns ``name:frame``."""
    (d / f"{name}.py").write_text("import numpy as np\n\n" + textwrap.dedent(body))
    return f"{name}:frame"


WRITER = """
import sys, numpy as np
from hyperframes import FrameSpec
from hyperframes.store import StoreWriter
with StoreWriter(sys.argv[1], FrameSpec((8, 10, 3)), {"fps": 25.0}, workers=1) as writer:
    writer.write_group(np.zeros((4, 8, 10, 3), np.uint8))
    writer.flush()
    print("ready", flush=True)
    sys.stdin.readline()
"""


# -- the cases ----------------------------------------------------------------------------


@dataclass
class Ctx:
    """A case's folders and what it must clean up."""

    inp: Path
    out: Path
    cleanup: list[Callable[[], None]]


@dataclass(frozen=True)
class Case:
    """One bad input.

    Attributes:
        id: short name (the test id).
        group: video, frames, store or cli.
        what: the input, in words.
        setup: builds the inputs; returns the argv of ``hyperframes`` or a callable that
            uses the library.
        expect: ``"error"`` (exit 1, one line), ``"usage"`` (exit 2) or ``"works"``.
        says: words the message must contain.
        makes: for ``works``: the output that must exist afterwards.
    """

    id: str
    group: str
    what: str
    setup: Callable[[Ctx], list[str] | Callable[[], Any]]
    expect: str = "error"
    says: str = ""
    makes: str = ""


def _odd(c: Ctx) -> list[str]:
    src = write_video(c.inp / "odd.mkv", noise(4, 47, 63))
    return ["transcode", str(src), str(c.out / "o.mp4")]


def _sixteen_bit(c: Ctx) -> list[str]:
    frames = (np.arange(4 * 16 * 24, dtype=np.uint16).reshape(4, 16, 24) * 41).astype(np.uint16)
    src = write_video(c.inp / "g16.mkv", frames, pix_fmt="gray16le", fmt_in="gray16le")
    return ["transcode", str(src), str(c.out / "o.mkv"), "--codec", "ffv1"]


def _zero_frames(c: Ctx) -> list[str]:
    path = c.inp / "zero.mkv"
    container = av.open(str(path), "w")
    stream = container.add_stream("ffv1", rate=25)
    stream.width, stream.height, stream.pix_fmt = 16, 16, "bgr0"
    container.start_encoding()
    container.close()
    return ["transcode", str(path), str(c.out / "o.mkv")]


def _truncated(c: Ctx) -> list[str]:
    data = clip(c.inp).read_bytes()
    (c.inp / "cut.mkv").write_bytes(data[: len(data) // 2])
    return ["transcode", str(c.inp / "cut.mkv"), str(c.out / "o.mkv"), "--codec", "ffv1"]


def _corrupt_mid(c: Ctx) -> list[str]:
    # two damaged places: FFmpeg's frame-threaded H.264 decoder sometimes hands out a
    # damaged frame before its error concealment flags it, on a busy machine (9 of 300
    # decodes of one damaged place, 0 of 300 of these two, with three busy loops running)
    data = bytearray(h264(c.inp).read_bytes())
    for at in (len(data) * 2 // 5, len(data) * 7 // 10):
        data[at : at + 50] = bytes(b ^ 0xFF for b in data[at : at + 50])
    (c.inp / "damaged.mp4").write_bytes(bytes(data))
    return ["transcode", str(c.inp / "damaged.mp4"), str(c.out / "o.mp4")]


def _vfr(c: Ctx) -> list[str]:
    src = write_video(c.inp / "vfr.mkv", noise(10), pts=[0, 1, 2, 5, 6, 9, 10, 11, 20, 21])
    return ["transcode", str(src), str(c.out / "o.mkv"), "--codec", "ffv1"]


def _too_big_for_pool(c: Ctx) -> list[str]:
    src = write_video(c.inp / "big.mkv", np.zeros((1, 1080, 1920, 3), np.uint8))
    return ["transcode", str(src), str(c.out / "o.mkv"), "--batch-size", "4096"]


def _render(body: str, name: str, size: str = "16x12") -> Callable[[Ctx], list[str]]:
    def setup(c: Ctx) -> list[str]:
        sys.path.insert(0, str(c.inp))
        c.cleanup.append(lambda: sys.path.remove(str(c.inp)))
        fn = module(c.inp, name, body)
        return ["render", fn, str(c.out / "o.mkv"), "--frames", "8", "--size", size,
                "--codec", "ffv1"]  # fmt: skip

    return setup


def _stage_batch_length(c: Ctx) -> Callable[[], Any]:
    frames = np.zeros((32, 8, 8, 3), np.uint8)
    sink = hf.VideoSink(c.out / "o.mkv", codec="ffv1")
    return lambda: (
        hf.Pipeline.from_frames(frames, batch_size=8).map(lambda b: b[:-1]).to(sink).run()
    )


def _nan_frames(c: Ctx) -> Callable[[], Any]:
    frames = np.zeros((16, 8, 8, 1), np.float32)
    frames[5, 2, 2, 0] = np.nan
    frames[9, 1, 1, 0] = np.inf
    sink = hf.StoreSink(c.out / "s.hfs")
    return lambda: hf.Pipeline.from_frames(frames, batch_size=8).group().to(sink).run()


def _stage_pool_too_big(c: Ctx) -> Callable[[], Any]:
    frames = np.zeros((8, 8, 8, 3), np.uint8)

    def huge(batch: np.ndarray) -> np.ndarray:  # a view: no memory until a pool holds it
        return np.broadcast_to(batch[:, :1, :1], (len(batch), 30000, 30000, 3))

    sink = hf.VideoSink(c.out / "o.mkv", codec="ffv1")
    return lambda: hf.Pipeline.from_frames(frames, batch_size=8).map(huge).to(sink).run()


def _traversal(pattern: str) -> Callable[[Ctx], Callable[[], Any]]:
    def setup(c: Ctx) -> Callable[[], Any]:
        frames = np.zeros((4, 8, 8, 3), np.uint8)
        return lambda: (
            hf.Pipeline.from_frames(frames).write_images(c.out / "frames", pattern=pattern).run()
        )

    return setup


def _flip_record(c: Ctx) -> list[str]:
    path = store(c.inp)
    raw = bytearray(get(path, fmt.group_key(1), fmt.RECORDS_DB))
    raw[len(raw) // 2] ^= 0x10
    put(path, fmt.group_key(1), bytes(raw), fmt.RECORDS_DB)
    return ["verify", str(path)]


def _truncated_store(c: Ctx) -> list[str]:
    path = store(c.inp)
    data = path / "data.mdb"
    os.truncate(data, data.stat().st_size // 2)
    return ["info", str(path)]


def _no_lock_file(c: Ctx) -> list[str]:
    path = store(c.inp)
    (path / "lock.mdb").unlink()
    return ["unpack", str(path), str(c.out / "o.mkv")]


def _opened_twice(c: Ctx) -> list[str]:
    path = store(c.inp)
    writer = StoreWriter(path, hf.FrameSpec((8, 10, 3)), {"fps": 25.0}, resume=True, workers=1)
    c.cleanup.append(writer.close)
    return ["unpack", str(path), str(c.out / "o.mkv")]


def _other_writer(c: Ctx) -> subprocess.Popen[str]:
    path = c.inp / "live.hfs"
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"

    def stop() -> None:
        assert child.stdin is not None
        child.stdin.write("\n")
        child.stdin.close()
        child.wait(30)
        assert child.stdout is not None
        child.stdout.close()

    c.cleanup.append(stop)
    return child


def _read_while_written(c: Ctx) -> list[str]:
    _other_writer(c)
    return ["unpack", str(c.inp / "live.hfs"), str(c.out / "o.mkv")]


def _resume_while_written(c: Ctx) -> list[str]:
    _other_writer(c)
    return ["pack", str(clip(c.inp)), str(c.inp / "live.hfs"), "--resume"]


def _existing_output(c: Ctx) -> list[str]:
    (c.out / "o.mkv").write_bytes(b"precious")
    return ["transcode", str(clip(c.inp)), str(c.out / "o.mkv"), "--codec", "ffv1"]


def _cli(*argv: str) -> Callable[[Ctx], list[str]]:
    """``argv`` with ``{clip}``, ``{store}`` and ``{out}`` filled in."""

    def setup(c: Ctx) -> list[str]:
        fill: dict[str, str] = {"out": str(c.out)}
        if any("{clip}" in a for a in argv):
            fill["clip"] = str(clip(c.inp))
        if any("{store}" in a for a in argv):
            fill["store"] = str(store(c.inp))
        return [a.format(**fill) for a in argv]

    return setup


RED = "frame = lambda i: np.zeros((12, 16, 3), np.uint8)\n"
CASES: tuple[Case, ...] = (
    # video ------------------------------------------------------------------------------
    Case(
        "video-missing",
        "video",
        "input file does not exist",
        _cli("transcode", "{out}/../in/nope.mp4", "{out}/o.mp4"),
        says="no such video file",
    ),
    Case(
        "video-empty",
        "video",
        "zero-byte file",
        lambda c: ["transcode", str(_touch(c.inp / "e.mp4")), str(c.out / "o.mp4")],
        says="empty",
    ),
    Case(
        "video-not-a-video",
        "video",
        "a text file named .mp4",
        lambda c: ["transcode", str(_text(c.inp / "t.mp4")), str(c.out / "o.mp4")],
        says="video",
    ),
    Case("video-truncated", "video", "an FFV1 .mkv cut in half", _truncated, says="truncated"),
    Case(
        "video-corrupt-frame",
        "video",
        "50 flipped bytes in two places of an H.264 stream",
        _corrupt_mid,
        says="cannot be decoded",
    ),
    Case(
        "video-zero-frames", "video", "a video stream with no frames", _zero_frames, says="zero.mkv"
    ),
    Case(
        "video-vfr",
        "video",
        "variable frame rate (pts 0,1,2,5,6,9...)",
        _vfr,
        expect="works",
        makes="o.mkv",
    ),
    Case(
        "video-odd-size",
        "video",
        "63x47 frames to H.264 yuv420p",
        _odd,
        says="even width and height",
    ),
    Case(
        "video-16-bit",
        "video",
        "16-bit gray FFV1 (read as 8-bit RGB)",
        _sixteen_bit,
        expect="works",
        makes="o.mkv",
    ),
    Case(
        "video-too-big-for-pool",
        "video",
        "1080p frames in batches of 4096",
        _too_big_for_pool,
        says="more than half of this machine",
    ),
    # frames -----------------------------------------------------------------------------
    Case(
        "frames-wrong-shape",
        "frames",
        "render returns 8x8 frames for --size 16x12",
        _render("frame = lambda i: np.zeros((8, 8, 3), np.uint8)\n", "hf_case_shape"),
        says="shape",
    ),
    Case(
        "frames-wrong-dtype",
        "frames",
        "render returns float64 frames",
        _render("frame = lambda i: np.zeros((12, 16, 3))\n", "hf_case_dtype"),
        says="float64",
    ),
    Case(
        "frames-nan-inf",
        "frames",
        "float32 frames holding NaN and inf, grouped into a store",
        _nan_frames,
        says="NaN",
    ),
    Case(
        "frames-non-contiguous",
        "frames",
        "render returns a strided view (works)",
        _render("frame = lambda i: np.zeros((24, 32, 3), np.uint8)[::2, ::2]\n", "hf_case_strided"),
        expect="works",
        makes="o.mkv",
    ),
    Case(
        "frames-none",
        "frames",
        "render returns None",
        _render("frame = lambda i: None\n", "hf_case_none"),
        says="None",
    ),
    Case(
        "frames-render-raises",
        "frames",
        "render raises on frame 5",
        _render(
            "def frame(i):\n    if i == 5:\n        raise KeyError('no five')\n"
            "    return np.zeros((12, 16, 3), np.uint8)\n",
            "hf_case_raise",
        ),
        says="no five",
    ),
    Case(
        "stage-wrong-batch-length",
        "frames",
        "a map stage returns 7 frames for 8",
        _stage_batch_length,
        says="7",
    ),
    Case(
        "stage-pool-too-big",
        "frames",
        "a stage returns 30000x30000 frames",
        _stage_pool_too_big,
        says="memory budget",
    ),
    # store ------------------------------------------------------------------------------
    Case(
        "store-not-a-store",
        "store",
        "a folder without data.mdb",
        lambda c: ["verify", str(_mkdir(c.inp / "x.hfs"))],
        says="not a hyperframes store",
    ),
    Case(
        "store-as-a-video",
        "store",
        "a store named where transcode reads a video",
        lambda c: ["transcode", str(store(c.inp)), str(c.out / "o.mp4")],
        says="is a hyperframes store",
    ),
    Case(
        "store-map-sampled",
        "store",
        "map over a store with --fps",
        lambda c: [
            "map",
            str(store(c.inp)),
            "json:dumps",
            "--out",
            str(c.out / "r.jsonl"),
            "--fps",
            "2",
        ],
        says="not a store yet",
    ),
    Case(
        "stores-map-sampled",
        "store",
        "map over a folder of stores with --every 2",
        lambda c: [
            "map",
            str(stores(c.inp)),
            "json:dumps",
            "--out",
            str(c.out / "r.jsonl"),
            "--every",
            "2",
        ],
        expect="usage",
        says="not stores yet",
    ),
    Case(
        "store-wrong-magic",
        "store",
        "header format 'other.store'",
        lambda c: ["info", str(header_with(store(c.inp), format="other.store"))],
        says="format",
    ),
    Case(
        "store-wrong-version",
        "store",
        "header version 99",
        lambda c: ["verify", str(header_with(store(c.inp), version=99))],
        says="version 99",
    ),
    Case(
        "store-header-lies-size",
        "store",
        "header says 16x10x3 frames (really 8x10x3)",
        lambda c: [
            "verify",
            str(header_with(store(c.inp), spec={"shape": [16, 10, 3], "dtype": "|u1"})),
        ],
        says="damaged",
    ),
    Case(
        "store-header-huge-size",
        "store",
        "header says frames of 2**40 bytes",
        lambda c: [
            "info",
            str(header_with(store(c.inp), spec={"shape": [1 << 20, 1 << 20], "dtype": "|u1"})),
        ],
        says="exceed",
    ),
    Case(
        "store-state-lies",
        "store",
        "state says 99 frames (the table holds 12)",
        lambda c: ["info", str(_state(store(c.inp), frames=99))],
        says="99",
    ),
    Case(
        "store-flipped-bytes",
        "store",
        "one flipped bit in a record",
        _flip_record,
        says="damaged: 4, 5, 6, 7",
    ),
    Case("store-truncated", "store", "data.mdb cut in half", _truncated_store, says="truncated"),
    Case(
        "store-no-lock-file",
        "store",
        "lock.mdb deleted (works: LMDB makes a new one)",
        _no_lock_file,
        expect="works",
        makes="o.mkv",
    ),
    Case(
        "store-opened-twice",
        "store",
        "unpack while this process holds it for writing",
        _opened_twice,
        says="already open for writing",
    ),
    Case(
        "store-read-while-written",
        "store",
        "unpack while another process appends (works)",
        _read_while_written,
        expect="works",
        makes="o.mkv",
    ),
    Case(
        "store-resume-while-written",
        "store",
        "pack --resume while another process writes",
        _resume_while_written,
        says="another process is writing",
    ),
    # cli --------------------------------------------------------------------------------
    Case(
        "cli-unknown-option",
        "cli",
        "transcode --frobnicate",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--frobnicate"),
        expect="usage",
    ),
    Case(
        "cli-batch-0",
        "cli",
        "--batch-size 0",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--batch-size", "0"),
        expect="usage",
    ),
    Case(
        "cli-batch-100",
        "cli",
        "--batch-size 100",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--batch-size", "100"),
        expect="usage",
    ),
    Case(
        "cli-batch-negative",
        "cli",
        "--batch-size -1",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--batch-size", "-1"),
        expect="usage",
    ),
    Case(
        "cli-workers-0",
        "cli",
        "--workers 0",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--workers", "0"),
        expect="usage",
    ),
    Case(
        "cli-size-garbage",
        "cli",
        "--size 12xq",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--size", "12xq"),
        expect="usage",
    ),
    Case(
        "cli-size-huge",
        "cli",
        "--size 100000x100000",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--size", "100000x100000"),
        expect="usage",
    ),
    Case(
        "cli-frames-0",
        "cli",
        "render --frames 0",
        _cli("render", "m:f", "{out}/o.mkv", "--frames", "0", "--size", "8x8"),
        expect="usage",
    ),
    Case(
        "cli-unknown-codec",
        "cli",
        "--codec h266",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--codec", "h266"),
        says="codec must be",
    ),
    Case(
        "cli-output-is-input",
        "cli",
        "transcode a file onto itself",
        lambda c: ["transcode", str(clip(c.out)), str(c.out / "clip.mkv")],
        says="the output is the input",
    ),
    Case(
        "cli-output-exists",
        "cli",
        "the output exists, no --overwrite",
        _existing_output,
        says="overwrite",
    ),
    Case(
        "cli-output-folder-missing",
        "cli",
        "the output's folder does not exist",
        _cli("transcode", "{clip}", "{out}/no/such/o.mkv"),
        says="does not exist",
    ),
    Case(
        "cli-output-unwritable",
        "cli",
        "output in read-only /sys",
        _cli("transcode", "{clip}", "/sys/hf-catalogue.mkv", "--codec", "ffv1"),
        says="denied",
    ),
    Case(
        "cli-output-unknown-extension",
        "cli",
        "output named o.qqq",
        _cli("transcode", "{clip}", "{out}/o.qqq"),
        says="o.qqq",
    ),
    Case(
        "cli-render-no-module",
        "cli",
        "render no_such_module:frame",
        _cli("render", "no_such_module_hf:frame", "{out}/o.mkv", "--frames", "2", "--size", "8x8"),
        says="cannot import",
    ),
    Case(
        "cli-start-past-end",
        "cli",
        "transcode --start 1000 of a 40-frame mp4",
        lambda c: ["transcode", str(h264(c.inp)), str(c.out / "o.mp4"), "--start", "1000"],
        says="past the last",
    ),
    Case(
        "cli-start-past-end-estimated",
        "cli",
        "--start 1000 of a .mkv (length unknown)",
        _cli("transcode", "{clip}", "{out}/o.mkv", "--start", "1000"),
        says="no frames",
    ),
    Case(
        "cli-frame-out-of-range",
        "cli",
        "frame 999 of a 12-frame store",
        _cli("frame", "{store}", "999", "{out}/f.png"),
        says="out of range",
    ),
    Case(
        "cli-frame-bad-image-name",
        "cli",
        "frame written as f.qqq",
        _cli("frame", "{store}", "0", "{out}/f.qqq"),
        says="f.qqq",
    ),
    Case(
        "images-traversal-dotdot",
        "cli",
        "image pattern '../escape_{index}.png'",
        _traversal("../escape_{index}.png"),
        says="not a plain file name",
    ),
    Case(
        "images-traversal-absolute",
        "cli",
        "image pattern '/tmp/abs_{index}.png'",
        _traversal("/tmp/abs_{index}.png"),
        says="not a plain file name",
    ),
    Case(
        "images-traversal-subfolder",
        "cli",
        "image pattern '{index}/../x.png'",
        _traversal("{index}/../x.png"),
        says="not a plain file name",
    ),
)


def _touch(path: Path) -> Path:
    path.write_bytes(b"")
    return path


def _text(path: Path) -> Path:
    path.write_text("this is not a video\n" * 50)
    return path


def _mkdir(path: Path) -> Path:
    path.mkdir()
    return path


def _state(path: Path, **changes: Any) -> Path:
    state = fmt.parse_state(get(path, fmt.STATE_KEY))
    put(path, fmt.STATE_KEY, fmt.dump_state(fmt.StoreState(**{**state.__dict__, **changes})))
    return path


# -- running a case -----------------------------------------------------------------------


@dataclass
class Outcome:
    code: int
    stderr: str
    command: str
    before: list[str]
    after: list[str]


def listing(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*"))


def run_case(case: Case, root: Path) -> Outcome:
    inp, out = root / "in", root / "out"
    inp.mkdir(parents=True)
    out.mkdir()
    ctx = Ctx(inp, out, [])
    try:
        action = case.setup(ctx)
        before = listing(out)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            if isinstance(action, list):
                command = "hyperframes " + " ".join(action)
                try:
                    code = main(action)
                except SystemExit as exc:  # argparse
                    code = int(exc.code or 0)
            else:
                command = "(library) " + case.what
                try:
                    action()
                    code = 0
                except Exception as exc:
                    code = fail(exc)
        after = listing(out)
    finally:
        for undo in reversed(ctx.cleanup):
            undo()
    command = command.replace(str(root), "").replace(" /", " ")
    return Outcome(code, err.getvalue().replace(str(root), "…"), command, before, after)


def check(case: Case, outcome: Outcome) -> None:
    lines = outcome.stderr.strip().splitlines()
    if case.expect == "works":
        assert outcome.code == 0, outcome.stderr
        assert outcome.after == sorted([*outcome.before, case.makes]), outcome.after
        return
    if case.expect == "usage":
        assert outcome.code == 2, outcome.stderr
        assert ": error: " in lines[-1], outcome.stderr
    else:
        assert outcome.code == 1, outcome.stderr
        assert len(lines) == 1 and lines[0].startswith("hyperframes: error: "), outcome.stderr
        assert case.says in lines[0], (case.says, lines[0])
    assert outcome.after == outcome.before, f"left behind: {outcome.after}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path) -> None:
    check(case, run_case(case, tmp_path))


def test_catalogue_is_big_enough_and_covers_each_group() -> None:
    assert len(CASES) >= 25 and len({c.id for c in CASES}) == len(CASES)
    assert {c.group for c in CASES} == {"video", "frames", "store", "cli"}


# -- the table ------------------------------------------------------------------------------


def table() -> str:
    """The catalogue as markdown, each case with the message it actually gives."""
    rows = [
        "# Bad input catalogue",
        "",
        "Generated by `python tests/reliability/test_bad_input_catalogue.py --table > "
        "docs/bad-input.md`; each row is also a test case (`tests/reliability/"
        "test_bad_input_catalogue.py`) that requires one line on stderr, a non-zero exit "
        "(1; 2 for usage errors) and nothing half-written in the output folder, or, for "
        "`works` rows, a complete output. `(library)` rows have no command-line form and "
        "show the error as the CLI would print it.",
        "",
        "| # | group | case | input | exit | message (stderr, last line) | ok |",
        "| ---: | --- | --- | --- | ---: | --- | --- |",
    ]
    for n, case in zip(itertools.count(1), CASES, strict=False):
        with tempfile.TemporaryDirectory(prefix="hf-case-") as tmp:
            outcome = run_case(case, Path(tmp))
        try:
            check(case, outcome)
            ok = "yes"
        except AssertionError as exc:
            ok = f"NO: {str(exc).splitlines()[0][:80]}"
        lines = outcome.stderr.strip().splitlines()
        message = lines[-1] if lines else "(none: it works)"
        message = message.replace("|", "\\|")
        what = case.what.replace("|", "\\|")
        rows.append(
            f"| {n} | {case.group} | `{case.id}` | {what} | {outcome.code} | {message} | {ok} |"
        )
    return "\n".join(rows) + "\n"


if __name__ == "__main__":
    if sys.argv[1:] != ["--table"]:
        sys.exit("usage: python tests/reliability/test_bad_input_catalogue.py --table")
    sys.stdout.write(table())
