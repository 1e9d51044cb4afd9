"""A script that starts a process run at top level fails with one clear line.

``spawn`` and ``forkserver`` children import the parent's main script again; a run that
is not under ``if __name__ == "__main__":`` would start again in every child. These
tests run real scripts with ``sys.executable``, as a user would.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from hyperframes.executors.processes import _under_an_if

ADVICE = 'put the run under `if __name__ == "__main__":`'

HEAD = """\
import numpy as np
import hyperframes as hf
from hyperframes.executors.processes import ProcessExecutor

def invert(batch):
    return 255 - batch

frames = np.zeros((64, 8, 8, 3), np.uint8)
"""


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "job.py"
    script.write_text(HEAD + textwrap.dedent(body))
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    "body",
    [
        "hf.Pipeline.from_frames(frames, batch_size=8).map(invert, workers=2)"
        '.run(executor="processes")\n',
        # the README's layout: one statement over several lines, the run on the last one
        """\
        out = (hf.Pipeline.from_frames(frames, batch_size=8)
            .map(invert, workers=2)
            .collect(executor="processes"))
        """,
        # an executor made by hand, run at top level: caught when the run starts its stage
        """\
        executor = ProcessExecutor(start_method="spawn")
        hf.Pipeline.from_frames(frames, batch_size=8).map(invert).run(executor=executor)
        """,
    ],
    ids=["one-line", "multi-line", "own-executor"],
)
def test_a_run_at_top_level_fails_with_one_clear_line(tmp_path: Path, body: str) -> None:
    done = run_script(tmp_path, body)
    lines = done.stderr.strip().splitlines()
    assert done.returncode != 0
    assert len(lines) < 30, done.stderr  # it was 195 lines, two tracebacks per child
    assert lines[-1].startswith("RuntimeError: a run with executor='processes' started at the top")
    assert ADVICE in lines[-1]
    assert str(tmp_path / "job.py") in lines[-1]  # names the script and line
    assert done.stderr.count("Traceback") == 1  # none from the children


def test_the_plain_script_case_stays_under_15_lines(tmp_path: Path) -> None:
    done = run_script(
        tmp_path,
        "hf.Pipeline.from_frames(frames, batch_size=8).map(invert, workers=2)"
        '.run(executor="processes")\n',
    )
    assert done.returncode != 0
    assert len(done.stderr.strip().splitlines()) < 15, done.stderr
    assert ADVICE in done.stderr
    assert "out of memory" not in done.stderr


def test_a_guarded_run_works_and_a_top_level_executor_is_no_run(tmp_path: Path) -> None:
    done = run_script(
        tmp_path,
        """\
        executor = ProcessExecutor(start_method="spawn")  # children make one too: harmless

        if __name__ == "__main__":
            out = (hf.Pipeline.from_frames(frames, batch_size=8)
                .map(invert, workers=2)
                .collect(executor=executor))
            print("inverted", int(out.min()), int(out.max()), len(out))
            out = hf.Pipeline.from_frames(frames, batch_size=8).map(invert).collect(
                executor="processes"
            )
            print("inverted", int(out.min()), len(out))
        """,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[:2] == ["inverted 255 255 64", "inverted 255 64"]


def test_a_run_the_parent_cannot_see_is_stopped_in_the_child(tmp_path: Path) -> None:
    # under some `if` the parent's check trusts the script; the children still refuse
    done = run_script(
        tmp_path,
        """\
        if True:
            hf.Pipeline.from_frames(frames, batch_size=8).map(invert).run(executor="processes")
        """,
    )
    assert done.returncode != 0
    assert done.stderr.count("stopped: importing the main module in it started a run") == 1
    last = done.stderr.strip().splitlines()[-2]  # the last line is the engine's note
    assert "StageError" in last and "stopped while starting" in last and ADVICE in last
    assert "out of memory" not in done.stderr
    assert "During handling" not in done.stderr
    assert len(done.stderr.splitlines()) < 50, done.stderr


@pytest.mark.parametrize(
    ("source", "line", "guarded"),
    [
        ("x = 1\nrun()\n", 2, False),
        ('if __name__ == "__main__":\n    run()\n', 2, True),
        ("def main():\n    run()\n\nmain()\n", 4, False),
        ('if __name__ == "__main__":\n    main()\n', 2, True),
        ("with open('f') as f:\n    run()\n", 2, False),
        ("try:\n    run()\nexcept Exception:\n    pass\n", 2, False),
        ("try:\n    pass\nexcept Exception:\n    run()\n", 4, False),
        ('try:\n    if __name__ == "__main__":\n        run()\nfinally:\n    pass\n', 3, True),
        ("for i in range(2):\n    run()\n", 2, False),
        ("(x\n   .run())\n", 2, False),
    ],
)
def test_which_lines_count_as_guarded(source: str, line: int, guarded: bool) -> None:
    assert _under_an_if(ast.parse(source).body, line) is guarded
