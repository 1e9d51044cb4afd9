"""What a newcomer sees in an 80-column terminal: every ``--help`` and a run's progress bar
(the quick start's demo and the map job) fit, with no line wider than the terminal."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios
from pathlib import Path

import pytest

from hyperframes.cli import COMMANDS, build_parser

COLUMNS = 80
ESCAPE = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def in_terminal(argv: list[str], cwd: Path | None = None, timeout: float = 300) -> list[str]:
    """Run ``hyperframes ARGV`` in a pseudo-terminal of 80 columns; its screen lines (each
    redraw of a progress line counts as one)."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, COLUMNS, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "hyperframes", *argv], stdin=slave, stdout=slave, stderr=slave,
        cwd=cwd, env=env, close_fds=True,
    )  # fmt: skip
    os.close(slave)
    chunks = []
    try:
        while True:
            try:
                data = os.read(master, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        assert proc.wait(timeout) == 0, b"".join(chunks).decode(errors="replace")[-2000:]
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    text = ESCAPE.sub("", b"".join(chunks).decode(errors="replace"))
    return [line for line in re.split(r"[\r\n]", text) if line]


def commands() -> list[str]:
    parser = build_parser()
    names = [a.choices for a in parser._actions if hasattr(a, "choices") and a.choices]
    assert len(COMMANDS) >= 8
    return sorted(name for choices in names if isinstance(choices, dict) for name in choices)


@pytest.mark.parametrize("command", ["", *commands()])
def test_every_help_fits_80_columns(command):
    lines = in_terminal([command, "--help"] if command else ["--help"])
    wide = [line for line in lines if len(line) > COLUMNS]
    assert lines and not wide, wide


def test_a_runs_progress_bar_fits_80_columns(clip_path, tmp_path):
    clip = str(clip_path("bikes.mp4"))
    lines = in_terminal(["transcode", clip, str(tmp_path / "o.mkv"), "--codec", "ffv1"])
    bars = [line for line in lines if "fr/s" in line]
    assert bars, lines
    wide = [line for line in lines if len(line) >= COLUMNS]
    assert not wide, wide
