"""Interrupt ``hyperframes pack``, ``transcode``, ``render`` and ``unpack`` mid-run, then resume.

Each trial starts the command as a subprocess in its own session, waits for its first
output (a committed group of the store, the first bytes of the hidden ``.NAME.partial-*.EXT``
video, the first image of the hidden ``.partial-*`` folder), waits a random delay drawn
from the rest of an uninterrupted run (0-90 % of the time from its first output to its
exit), and sends a signal: SIGINT, SIGTERM, SIGHUP and SIGKILL in turn. When the command
won the race (it finished before the signal landed), the trial is run again with a
quarter of the delay, then with none, so that every counted trial interrupts its run
mid-way. Commands: ``pack``, ``transcode`` (with ``--size``), ``render``, ``unpack`` to a
video and ``unpack-images`` (``unpack`` to a folder); videos are FFV1 (decoding is exact).
Then it checks what the signal left:

- every signal: nothing under the output's final name (a store is resumable, not final);
  no process of the killed session left running;
- SIGINT, SIGTERM, SIGHUP: exit code 128 + the signal, one line on stderr, and no temp
  left (the hidden partial video or image folder removed);
- SIGKILL: the hidden temp may stay (counted); the rerun must replace or remove it;
- ``pack``: a store that opens, verifies and holds a prefix of the reference frames,
  which ``pack --resume`` completes.

Then it reruns (``--resume`` for ``pack``) and requires the decoded frames and timestamps
to equal an uninterrupted run's, and the folder to hold nothing but the output.

Interrupted mid-way means ``0 < committed < total`` for ``pack``; for the others, that a
part of the output was written when the signal was sent (bytes of the hidden video over
the finished video's, images in the hidden folder over all) and the run did not finish.

``--enospc N`` adds N trials per command that write to a small tmpfs the script mounts
(root only; sized at random between 20 % and 80 % of the output): the command must fail
with one line that mentions the space, leave nothing under the final name and no temp,
and (``pack``) a store that verifies and, once the tmpfs is remounted larger, resumes to
equal the reference; the others rerun to equal it.

Run: ``python benchmarks/kill_trials.py [--trials 20] [--enospc 3] [--budget 900]``;
prints one row per command and fault: trials, interrupted mid-way, the median share
written when the signal was sent, races the command won first (retried), temps left by
a kill, outputs that opened, verified and resumed (or reran) equal to an uninterrupted
run, temps still there after the rerun, failures.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import av
import cv2
import numpy as np
import psutil
import xxhash

COMMANDS = ("pack", "transcode", "render", "unpack", "unpack-images")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGKILL)
HANDLED = frozenset(SIGNALS[:3])
WIDTH, HEIGHT = 320, 192
RENDER_MODULE = "hf_kill_render"
IMAGE_GLOB = "frame_*.png"
POLL_S = 0.002


# -- inputs, commands, outputs ------------------------------------------------------------


@dataclass(frozen=True)
class Inputs:
    """What every trial reads: a clip, a module with a render function, and a store."""

    folder: Path
    clip: Path
    frames: int
    size: tuple[int, int]  # the clip's width and height
    store: Path


def make_inputs(
    folder: Path,
    frames: int = 240,
    *,
    clip: Path | None = None,
    unpack_size: tuple[int, int] | None = None,
) -> Inputs:
    """Write a clip of ``frames`` frames (unless ``clip`` is given: then all of its frames),
    the render module, and the store ``unpack`` reads: an uninterrupted ``pack`` of the
    clip, or of the clip transcoded to ``unpack_size`` (a smaller store, faster trials)."""
    from hyperframes.io.probe import probe

    folder.mkdir(parents=True, exist_ok=True)
    if clip is None:
        clip = folder / "clip.mkv"
        _write_clip(clip, frames)
        size = (WIDTH, HEIGHT)
    else:
        facts = probe(clip)
        frames, size = int(facts["frames"]), (int(facts["width"]), int(facts["height"]))
    width, height = WIDTH, HEIGHT
    module = f"""
        import numpy as np

        def frame(i):
            y, x = np.mgrid[0:{height}, 0:{width}]
            out = np.empty(({height}, {width}, 3), np.uint8)
            out[..., 0] = (x + 3 * i) % 256
            out[..., 1] = (y * 2 + i * i) % 256
            out[..., 2] = (x * y + i) % 251
            return out
    """
    (folder / f"{RENDER_MODULE}.py").write_text(textwrap.dedent(module))
    inputs = Inputs(folder, clip, frames, size, folder / "packed.hfs")
    source = inputs
    if unpack_size is not None:
        small = folder / "small.mkv"
        width, height = unpack_size
        run(["transcode", str(clip), str(small), "--codec", "ffv1", "--size",
             f"{width}x{height}"], folder)  # fmt: skip
        source = dataclasses.replace(inputs, clip=small)
    run(argv_for("pack", source, inputs.store), folder)
    return inputs


def _write_clip(path: Path, frames: int) -> None:
    """Moving gradients plus a little noise, in FFV1 (decoding is bit-exact)."""
    y, x = np.mgrid[0:HEIGHT, 0:WIDTH]
    rng = np.random.default_rng(7)
    with av.open(str(path), "w") as container:
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = WIDTH, HEIGHT, "bgr0"
        for i in range(frames):
            frame = np.empty((HEIGHT, WIDTH, 3), np.uint8)
            frame[..., 0] = (x * 2 + i * (i // 16)) % 256
            frame[..., 1] = (y * 3 + i) % 256
            frame[..., 2] = rng.integers(0, 8, (HEIGHT, WIDTH), dtype=np.uint8)
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = i
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))


def argv_for(command: str, inputs: Inputs, out: Path) -> list[str]:
    """The command line of ``command`` writing ``out``: FFV1 videos (decoding is exact);
    ``transcode`` halves the size (and so runs its resize stage)."""
    clip = str(inputs.clip)
    if command == "pack":
        return ["pack", clip, str(out), "--max-len", "8", "--workers", "1", "--json"]
    if command == "transcode":
        half = f"{inputs.size[0] // 4 * 2}x{inputs.size[1] // 4 * 2}"
        return ["transcode", clip, str(out), "--codec", "ffv1", "--size", half, "--json"]
    if command == "render":
        width, height = WIDTH, HEIGHT
        return ["render", f"{RENDER_MODULE}:frame", str(out), "--frames", str(inputs.frames),
                "--size", f"{width}x{height}", "--fps", "25", "--codec", "ffv1",
                "--json"]  # fmt: skip
    if command in ("unpack", "unpack-images"):
        return ["unpack", str(inputs.store), str(out), "--json"]
    raise ValueError(f"unknown command {command!r}")


def output_name(command: str) -> str:
    return {"pack": "out.hfs", "unpack-images": "frames"}.get(command, "out.mkv")


def temp_of(out: Path) -> Path:
    """The hidden file a video sink writes before renaming it to ``out``
    (``.NAME.partial-PID-TOKEN.EXT``), or a path that does not exist while there is none."""
    found = sorted(out.parent.glob(f".{out.stem}.partial-*{out.suffix}"))
    return found[0] if found else out.with_name(f".{out.stem}.partial-none{out.suffix}")


def image_temps(folder: Path) -> list[Path]:
    """The hidden folders an image sink writes into before moving the files out."""
    return sorted(folder.glob(".partial-*")) if folder.is_dir() else []


def start(argv: list[str], cwd: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hyperframes", *argv], cwd=cwd, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip


def run(argv: list[str], cwd: Path, *, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run to the end; raises ``AssertionError`` on a non-zero exit when ``check``."""
    done = subprocess.run(
        [sys.executable, "-m", "hyperframes", *argv], cwd=cwd, capture_output=True, text=True,
        timeout=300,
    )  # fmt: skip
    if check and done.returncode != 0:
        raise AssertionError(f"hyperframes {argv[0]} failed: {done.stderr.strip()}")
    return done


# -- what an output holds -----------------------------------------------------------------


@dataclass(frozen=True)
class Content:
    """An output's frames as digests (never the pixels), and their timestamps."""

    digests: tuple[int, ...]
    times: tuple[float, ...]

    def __len__(self) -> int:
        return len(self.digests)

    def prefix(self, count: int) -> Content:
        return Content(self.digests[:count], self.times[:count])

    def same(self, other: Content) -> bool:
        return self.digests == other.digests and bool(
            np.allclose(self.times, other.times, equal_nan=True)
        )


def digest(frame: np.ndarray) -> int:
    return xxhash.xxh3_64_intdigest(np.ascontiguousarray(frame).tobytes())


def content(command: str, path: Path) -> Content:
    """What the output of ``command`` at ``path`` holds."""
    if command == "pack":
        return store_content(path)
    if command == "unpack-images":
        return images_content(path)
    return video_content(path)


def store_content(path: Path) -> Content:
    from hyperframes.store import FrameStore

    with FrameStore(path, read_ahead=False, hot_bytes=0, warm_bytes=0, decode="group") as store:
        digests = tuple(digest(frame) for frame in store)
        return Content(digests, tuple(np.asarray(store.info.timestamps, np.float64).tolist()))


def video_content(path: Path) -> Content:
    """Frames decoded until the end, or until a truncated file (a killed run's temp) stops."""
    digests, times = [], []
    with av.open(str(path)) as container, contextlib.suppress(av.FFmpegError):
        for frame in container.decode(video=0):
            digests.append(digest(frame.to_ndarray(format="rgb24")))
            times.append(float(frame.time or 0.0))
    return Content(tuple(digests), tuple(times))


def images_content(folder: Path) -> Content:
    digests = []
    for path in sorted(folder.glob(IMAGE_GLOB)):
        image = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
        digests.append(digest(cv2.cvtColor(image, cv2.COLOR_BGR2RGB)))
    return Content(tuple(digests), (float("nan"),) * len(digests))


def verify_store(path: Path, expected: Content) -> int:
    """Open a partial store, verify it and compare it with the reference; its frames.

    Raises:
        AssertionError: it fails verify or is not a prefix of the reference.
    """
    from hyperframes.store import FrameStore

    with FrameStore(path, read_ahead=False) as store:
        bad = store.verify()
        count = len(store)
    if bad:
        raise AssertionError(f"pack: the interrupted store fails verify at frames {bad[:5]}")
    if not store_content(path).same(expected.prefix(count)):
        raise AssertionError("pack: the interrupted store is not a prefix of the reference")
    return count


# -- interrupting a run -------------------------------------------------------------------


def progressed(command: str, out: Path) -> Callable[[], bool]:
    """Whether the command has written its first output: a committed group (``pack``),
    bytes in the hidden video, an image in the hidden folder."""
    if command == "pack":
        from hyperframes.store.resume import resume_point

        return lambda: resume_point(out)[0] > 0
    if command == "unpack-images":
        return lambda: any(any(temp.glob("*.png")) for temp in image_temps(out))

    def has_bytes() -> bool:
        try:
            return temp_of(out).stat().st_size > 0
        except FileNotFoundError:
            return False

    return has_bytes


def done_frames(command: str, out: Path) -> int:
    """Frames an interrupted run left: committed (``pack``), decodable in the hidden temp
    (a video after SIGKILL), images in the hidden folder; 0 when the temp was removed."""
    if command == "pack":
        from hyperframes.store.resume import resume_point

        return resume_point(out)[0]
    if command == "unpack-images":
        return sum(len(list(temp.glob("*.png"))) for temp in image_temps(out))
    temp = temp_of(out)
    return len(video_content(temp)) if temp.exists() else 0


def written(command: str, out: Path, ref: Reference) -> Callable[[], float]:
    """The share of the output written so far: frames committed (``pack``), images in the
    hidden folder, bytes of the hidden video, over the uninterrupted run's."""
    if command == "pack" or command == "unpack-images":
        return lambda: done_frames(command, out) / len(ref.content)

    def share() -> float:
        try:
            return temp_of(out).stat().st_size / ref.size
        except FileNotFoundError:
            return 0.0

    return share


def finished(command: str, out: Path, expected: Content) -> Callable[[int], bool]:
    """Whether a run that exited with this code finished before the signal landed.

    A run the signal reached after its output was final (renamed, or every group
    committed) finished; the output must then equal the reference.

    Raises:
        AssertionError: something other than the complete output is under the final name.
    """

    def check(returncode: int) -> bool:
        if command == "pack":
            from hyperframes.store.resume import resume_point

            return returncode == 0 or resume_point(out)[0] >= len(expected)
        if command == "unpack-images":
            final = list(out.glob(IMAGE_GLOB)) if out.is_dir() else []
        else:
            final = [out] if out.exists() else []
        if returncode == 0:
            return True
        if not final:
            return False
        if not content(command, out).same(expected):
            raise AssertionError(
                f"{command} exited {returncode} and left a half-written output under the "
                f"final name {out.name}"
            )
        return True

    return check


@dataclass(frozen=True)
class Interrupted:
    """One interrupted run: its exit code and stderr, and the delay that landed mid-run."""

    returncode: int
    stderr: str
    delay: float
    attempts: int
    at_signal: float  # what ``measure`` said just before the signal was sent


def interrupt(
    argv: list[str],
    signum: int,
    *,
    cwd: Path,
    progressed: Callable[[], bool],
    finished: Callable[[int], bool],
    reset: Callable[[], None],
    delay: float,
    measure: Callable[[], float] = lambda: 0.0,
    tries: int = 3,
    timeout: float = 120.0,
) -> Interrupted:
    """Run ``hyperframes ARGV`` and send ``signum`` ``delay`` seconds after its first output.

    When the command finished before the signal landed, ``reset()`` clears its output and
    the run is tried again with a quarter of the delay, the last time with none.
    ``measure()`` is called just before the signal (how much of the output is written).

    Raises:
        AssertionError: the command exited before any output, finished first in every
            try, or left processes of its session running.
    """
    name = signal.Signals(signum).name
    for attempt in range(1, tries + 1):
        child = start(argv, cwd)
        at_signal = 0.0
        late = False  # no mid-run moment (nothing or everything written): try again
        try:
            # Another process's files: only polling sees them change (no thread to join).
            while not progressed():
                if child.poll() is not None:
                    break
                time.sleep(POLL_S)
            if child.poll() is None:
                time.sleep(delay)  # the random moment itself
                at_signal = measure()
                late = not 0.0 < at_signal < 1.0  # nothing, or everything, written yet
                if not late:
                    child.send_signal(signum)  # no-op once the child has exited and been reaped
            elif child.returncode != 0:
                raise AssertionError(
                    f"hyperframes {argv[0]} exited {child.returncode} before any output: "
                    f"{child.communicate()[1].strip()}"
                )
            _, err = child.communicate(timeout=timeout)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        left = session_processes(child.pid)
        if left:
            raise AssertionError(f"processes of the interrupted {argv[0]} still run: {left}")
        if not late and not finished(child.returncode):
            return Interrupted(child.returncode, err.strip(), delay, attempt, at_signal)
        reset()
        delay = delay / 4 if attempt < tries - 1 else 0.0
    raise AssertionError(
        f"hyperframes {argv[0]} finished before {name} landed in {tries} tries (the last "
        "with no delay after its first output); give it a longer input"
    )


def session_processes(sid: int) -> list[int]:
    """Processes still running in session ``sid`` (the killed command's own session)."""
    left = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getsid(proc.pid) == sid:
                left.append(proc.pid)
        except (ProcessLookupError, PermissionError):
            continue
    return left


def clear(folder: Path) -> Callable[[], None]:
    """Remove everything in ``folder`` (an attempt the command won)."""

    def reset() -> None:
        for path in folder.iterdir():
            if path.is_dir():
                shutil.rmtree(path)
            else:
                path.unlink()

    return reset


# -- a small disk -------------------------------------------------------------------------


class MountRefused(RuntimeError):
    """A tmpfs cannot be mounted here (not root, or no ``mount``)."""


@contextlib.contextmanager
def tmpfs(folder: Path, size_kib: int) -> Iterator[Callable[[int], None]]:
    """Mount a ``size_kib`` KiB tmpfs on ``folder``; yields a function that remounts it
    with another size (contents kept). Unmounted on exit.

    Raises:
        MountRefused: mounting is not allowed here.
    """
    folder.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        raise MountRefused("no mount command")
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_kib}k", "tmpfs", str(folder)],
        capture_output=True, text=True,
    )  # fmt: skip
    if done.returncode != 0:
        raise MountRefused(f"cannot mount a tmpfs ({done.stderr.strip()}); run as root")

    def resize(kib: int) -> None:
        subprocess.run(
            ["mount", "-o", f"remount,size={kib}k", str(folder)], check=True, capture_output=True
        )

    try:
        yield resize
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=False)


def output_bytes(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


# -- the trials ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Reference:
    """An uninterrupted run: what it wrote, its size, and how long it wrote for."""

    content: Content
    size: int
    span: float  # seconds from the first output to the exit


@dataclass
class Outcome:
    midway: bool = False
    done: int = 0  # frames the interruption left (committed, or readable in a temp)
    at_signal: float = float("nan")  # share of the output written when the signal was sent
    retries: int = 0
    temp_left: bool = False
    equal: bool = False
    stale_temp: bool = False
    problems: list[str] = field(default_factory=list)  # failures found after all checks ran


@dataclass
class Tally:
    trials: int = 0
    midway: int = 0
    retries: int = 0
    temps: int = 0
    equal: int = 0
    stale: int = 0
    at_signal: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    wall: float = 0.0

    def add(self, outcome: Outcome) -> None:
        self.midway += outcome.midway
        self.retries += outcome.retries
        self.temps += outcome.temp_left
        self.equal += outcome.equal
        self.stale += outcome.stale_temp
        self.at_signal.append(outcome.at_signal)
        self.failures.extend(outcome.problems)


def reference(command: str, inputs: Inputs, folder: Path) -> Reference:
    """Run ``command`` uninterrupted, timing it from its first output."""
    folder.mkdir(parents=True)
    out = folder / output_name(command)
    child = start(argv_for(command, inputs, out), inputs.folder)
    seen = progressed(command, out)
    while not seen() and child.poll() is None:
        time.sleep(POLL_S)
    first = time.perf_counter()
    _, err = child.communicate(timeout=300)
    span = time.perf_counter() - first
    if child.returncode != 0:
        raise AssertionError(f"hyperframes {command} failed: {err.strip()}")
    return Reference(content(command, out), output_bytes(out), span)


def trial(
    command: str, inputs: Inputs, folder: Path, signum: int, delay: float, ref: Reference
) -> Outcome:
    """Interrupt ``command`` with ``signum`` ``delay`` s after its first output, check what
    it left, rerun (``--resume``), compare with the reference.

    Raises:
        AssertionError: a broken promise (the message says which).
    """
    folder.mkdir(parents=True)
    out = folder / output_name(command)
    argv = argv_for(command, inputs, out)
    expected = ref.content
    got = interrupt(
        argv, signum, cwd=inputs.folder, progressed=progressed(command, out),
        finished=finished(command, out, expected), reset=clear(folder), delay=delay,
        measure=written(command, out, ref),
    )  # fmt: skip
    outcome = Outcome(retries=got.attempts - 1, at_signal=got.at_signal)
    name = signal.Signals(signum).name
    if signum in HANDLED:
        if got.returncode != 128 + signum:
            raise AssertionError(f"{command}: {name} gave exit code {got.returncode}: {got.stderr}")
        if got.stderr != f"hyperframes: interrupted ({name})":
            raise AssertionError(f"{command}: {name} gave stderr {got.stderr!r}")
    elif got.returncode != -signal.SIGKILL:
        raise AssertionError(f"{command}: SIGKILL gave exit code {got.returncode}: {got.stderr}")
    outcome.done = done_frames(command, out)
    if command == "pack":
        if out.exists() and outcome.done:
            verify_store(out, expected)
        outcome.midway = 0 < outcome.done < len(expected)
        run([*argv, "--resume"], inputs.folder)
    else:
        if command == "unpack-images":
            temps = image_temps(out)
            final = list(out.glob(IMAGE_GLOB)) if out.is_dir() else []
        else:
            temps = [temp_of(out)] if temp_of(out).exists() else []
            final = [out] if out.exists() else []
        if final:
            raise AssertionError(f"{command}: {name} left {len(final)} file(s) under final names")
        outcome.temp_left = bool(temps)
        if temps and signum in HANDLED:
            raise AssertionError(f"{command}: {name} left its temp {temps[0].name}")
        # Written in part when the signal was sent, and not finished after it.
        outcome.midway = 0 < got.at_signal < 1
        run(argv, inputs.folder)
        if command == "unpack-images":
            outcome.stale_temp = bool(image_temps(out))
        elif temp_of(out).exists():
            raise AssertionError(f"the rerun of {command} left its temp {temp_of(out).name}")
    if not content(command, out).same(expected):
        raise AssertionError(f"{command}: the rerun differs from an uninterrupted run")
    outcome.equal = True
    names = sorted(p.name for p in folder.iterdir())
    if names != [out.name]:
        raise AssertionError(f"{command}: the folder holds more than the output: {names}")
    return outcome


def enospc_trial(
    command: str, inputs: Inputs, folder: Path, size_kib: int, ref: Reference
) -> Outcome:
    """Run ``command`` onto a ``size_kib`` KiB tmpfs; check what it left; make room; resume
    or rerun; compare with the reference. An error message that is not one line about the
    space is recorded in ``Outcome.problems`` (the rest was still checked).

    Raises:
        AssertionError: a broken promise. MountRefused: no tmpfs here.
    """
    with tmpfs(folder, size_kib) as resize:
        out = folder / output_name(command)
        argv = argv_for(command, inputs, out)
        done = run(argv, inputs.folder, check=False)
        lines = done.stderr.strip().splitlines()
        if done.returncode != 1:
            raise AssertionError(f"{command} on a full disk exited {done.returncode}: {lines}")
        outcome = Outcome(done=done_frames(command, out), at_signal=size_kib * 1024 / ref.size)
        expected = ref.content
        if command == "pack":
            if outcome.done:
                verify_store(out, expected)
            outcome.midway = 0 < outcome.done < len(expected)
            resize(4 * ref.size // 1024 + (16 << 10))
            run([*argv, "--resume"], inputs.folder)
        else:
            left = sorted(p.name for p in folder.rglob("*"))
            if left:
                raise AssertionError(f"{command} on a full disk left {left[:5]}")
            outcome.midway = True  # it failed for space: the disk filled mid-write
            resize(4 * ref.size // 1024 + (16 << 10))
            run(argv, inputs.folder)
        if not content(command, out).same(expected):
            raise AssertionError(f"{command}: the rerun after the full disk differs")
        outcome.equal = True
        names = sorted(p.name for p in folder.iterdir())
        if names != [out.name]:
            raise AssertionError(f"{command}: the folder holds more than the output: {names}")
        if len(lines) != 1 or "space" not in lines[0].lower():
            outcome.problems.append(f"{command}: not one line that mentions space: {lines}")
        return outcome


def trials(
    commands: tuple[str, ...] = COMMANDS,
    *,
    count: int = 20,
    signals: tuple[int, ...] = SIGNALS,
    enospc: int = 0,
    budget: float = 900.0,
    seed: int = 0,
    frames: int = 240,
    root: Path | None = None,
    log: bool = True,
) -> dict[str, Tally]:
    """``count`` signal trials (``signals`` in turn) and ``enospc`` full-disk trials per
    command (fewer when ``budget`` seconds run out). Keys: the command, and
    ``"COMMAND ENOSPC"`` (absent where no tmpfs can be mounted)."""
    rng = random.Random(seed)
    deadline = time.perf_counter() + budget
    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory(prefix="hf-kill-", dir=root) as tmp:
        inputs = make_inputs(Path(tmp) / "inputs", frames)
        for number, command in enumerate(commands):
            ref = reference(command, inputs, Path(tmp) / f"ref-{command}")
            share = (deadline - time.perf_counter()) / (len(commands) - number)
            until = time.perf_counter() + share  # an equal share of the time left
            folder = Path(tmp) / command
            tally = tallies[command] = Tally()
            _signal_trials(command, inputs, folder, ref, tally, count, signals, rng, until, log)
            full = Tally()
            _enospc_trials(command, inputs, folder, ref, full, enospc, rng, log)
            if full.trials:
                tallies[f"{command} ENOSPC"] = full
    return tallies


def _signal_trials(
    command: str, inputs: Inputs, folder: Path, ref: Reference, tally: Tally, count: int,
    signals: tuple[int, ...], rng: random.Random, until: float, log: bool,
) -> None:  # fmt: skip
    began = time.perf_counter()
    for k in range(count):
        if time.perf_counter() > until:
            break
        signum = signals[k % len(signals)]
        delay = rng.uniform(0.0, 0.9) * ref.span
        name = signal.Signals(signum).name
        what = f"{command} trial {k}, {name} {delay:.3f} s after the first output"
        tally.trials += 1
        try:
            outcome = trial(command, inputs, folder / f"signal-{k}", signum, delay, ref)
        except AssertionError as exc:
            tally.failures.append(f"{what}: {exc}")
            _say(log, f"{what}: FAILED: {exc}")
            continue
        tally.add(outcome)
        _say(log, f"{what}: {outcome.at_signal:.0%} written at the signal, {outcome.done} of "
             f"{len(ref.content)} frames left, retries {outcome.retries}, temp left "
             f"{outcome.temp_left}, equal after rerun {outcome.equal}")  # fmt: skip
    tally.wall = time.perf_counter() - began


def _enospc_trials(
    command: str, inputs: Inputs, folder: Path, ref: Reference, tally: Tally, count: int,
    rng: random.Random, log: bool,
) -> None:  # fmt: skip
    began = time.perf_counter()
    for k in range(count):
        size = max(64, int(rng.uniform(0.2, 0.8) * ref.size) // 1024)
        what = f"{command} ENOSPC trial {k}, a tmpfs of {size} KiB ({size * 1024 / ref.size:.0%})"
        tally.trials += 1
        try:
            outcome = enospc_trial(command, inputs, folder / f"full-{k}", size, ref)
        except MountRefused as exc:
            tally.trials -= 1
            _say(log, f"ENOSPC trials skipped: {exc}")
            break
        except AssertionError as exc:
            tally.failures.append(f"{what}: {exc}")
            _say(log, f"{what}: FAILED: {exc}")
            continue
        problems = "; ".join(outcome.problems) or "no problem"
        outcome.problems = [f"{what}: {problem}" for problem in outcome.problems]
        tally.add(outcome)
        _say(log, f"{what}: {outcome.done} frames left, equal after rerun {outcome.equal}, "
             f"{problems}")  # fmt: skip
    tally.wall = time.perf_counter() - began


def _say(log: bool, line: str) -> None:
    if log:
        print(line, flush=True)


def table(tallies: dict[str, Tally]) -> str:
    rows = ["| command | trials | interrupted mid-way | written at the signal (ENOSPC: disk size) "
            "(median) | races "
            "won by the command (retried) | temp left by the kill | opened, verified, rerun "
            "equal | stale temp after rerun | failures | wall s |",
            "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]  # fmt: skip
    for command, t in tallies.items():
        share = float(np.median(t.at_signal)) if t.at_signal else float("nan")
        rows.append(
            f"| {command} | {t.trials} | {t.midway} | {share:.0%} | {t.retries} | {t.temps} | "
            f"{t.equal} | {t.stale} | {len(t.failures)} | {t.wall:.0f} |"
        )
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20, help="signal trials per command")
    parser.add_argument("--enospc", type=int, default=0, help="full-disk trials per command")
    parser.add_argument("--budget", type=float, default=900.0, help="seconds for all trials")
    parser.add_argument("--frames", type=int, default=240, help="frames of the test clip")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--commands", nargs="+", default=list(COMMANDS), choices=COMMANDS)
    args = parser.parse_args()
    tallies = trials(
        tuple(args.commands), count=args.trials, enospc=args.enospc, budget=args.budget,
        seed=args.seed, frames=args.frames,
    )  # fmt: skip
    print()
    print(table(tallies))
    failed = sum(len(t.failures) for t in tallies.values())
    short = [c for c, t in tallies.items() if "ENOSPC" not in c and t.trials < args.trials]
    note = f"; budget ran out before {args.trials} trials of {short}" if short else ""
    midway = all(t.midway == t.trials for t in tallies.values())
    verdict = "held" if not failed and midway else "NOT HELD"
    print(f"\nverdict: {verdict} ({failed} failures){note}")
    for command, t in tallies.items():
        for failure in t.failures:
            print(f"- {command}: {failure}")
    return 0 if verdict == "held" else 1


if __name__ == "__main__":
    sys.exit(main())
