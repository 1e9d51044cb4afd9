"""Stages of a kind of one's own (``docs/stages.md``): the page's examples run as written,
and a maker that makes the wrong kind is named in one line."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hyperframes as hf

PAGE = Path(__file__).resolve().parents[2] / "docs" / "stages.md"


def test_the_pages_examples_run(tmp_path, clip_path):
    shutil.copy(clip_path("bigbuckbunny.mp4"), tmp_path / "clip.mp4")
    program = []
    for body in re.findall(r"^```python\n(.*?)^```", PAGE.read_text(), re.S | re.M):
        first = body.splitlines()[0].strip()
        if re.fullmatch(r"# [\w/]+\.py", first):
            (tmp_path / first[2:]).write_text(body)
        else:
            program.append(body)
    done = subprocess.run(
        [sys.executable, "-c", "\n".join(program)], cwd=tmp_path, capture_output=True,
        text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "{'frames': 132} {'calls':" in done.stdout


class Doubled(hf.Stream):
    """Each batch goes on after the next one has come (a look-ahead of one batch)."""

    def __init__(self, batch_size: int) -> None:
        self.held: list = []
        self.closed = False

    def push(self, batch):  # type: ignore[no-untyped-def]
        self.held.append(batch)
        return [self.held.pop(0)] if len(self.held) > 1 else []

    def finish(self):  # type: ignore[no-untyped-def]
        held, self.held = self.held, []
        return held


def test_a_stream_that_holds_a_batch_back_keeps_every_frame_in_order():
    frames = np.arange(40, dtype=np.uint8).repeat(12).reshape(40, 2, 2, 3)
    keeps = hf.Footprint("look-ahead", held_batches=1)
    out = hf.Pipeline.from_frames(frames, batch_size=4).stage(Doubled, keeps=keeps).collect()
    np.testing.assert_array_equal(out, frames)


def test_a_maker_of_the_wrong_kind_is_named():
    pipe = hf.Pipeline.from_frames(np.zeros((4, 2, 2, 3), np.uint8))
    with pytest.raises(TypeError, match=r"stage 'stage:<lambda>': its maker returned a list"):
        pipe.stage(lambda size: []).run()
    with pytest.raises(TypeError, match=r"not a hyperframes\.Strategy; subclass Strategy"):
        pipe.stage(lambda: Doubled(1), fn=lambda f: f).run()
    with pytest.raises(ValueError, match="into= and workers= are for a strategy's fn"):
        pipe.stage(Doubled, into="x")
    with pytest.raises(TypeError, match="abstract"):
        type("Half", (hf.Stream,), {"push": lambda self, b: [b]})()
