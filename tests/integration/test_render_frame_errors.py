"""A render that returns a frame of the wrong size says what was expected and why.

Frame 0 has no frames before it: its expected size comes from the render's spec (the
``spec=`` of ``Pipeline.from_generator``, ``--size`` on the command line).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import numpy as np
import pytest

from hyperframes import FrameError, FrameSpec, Pipeline
from hyperframes.cli import main


def small(i: int) -> np.ndarray:
    return np.zeros((8, 8, 3), np.uint8)


def test_api_message_names_the_spec_for_frame_0() -> None:
    with pytest.raises(FrameError) as caught:
        Pipeline.from_generator(small, count=4, spec=FrameSpec((12, 16, 3))).run()
    message = str(caught.value)
    assert message.startswith(
        "frame 0 from small(0) is 8x8, 3 channels, uint8, expected 16x12, 3 channels, uint8 as "
        "the render's spec says "
        "(spec= in the API, --size on the command line)"
    )
    assert "before it" not in message


def test_api_message_for_a_later_frame_also_names_the_spec() -> None:
    def late(i: int) -> np.ndarray:
        return np.zeros((12, 16, 3), np.float32 if i == 5 else np.uint8)

    with pytest.raises(
        FrameError, match=r"frame 5 from late\(5\) is 16x12, 3 channels, float32, expected "
    ):
        Pipeline.from_generator(late, count=8, spec=FrameSpec((12, 16, 3)), batch_size=4).run()


def test_cli_message_names_size(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "hf_small_scene.py").write_text(
        textwrap.dedent("""
        import numpy as np
        def frame(i):
            return np.zeros((8, 8, 3), np.uint8)
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    args = ["render", "hf_small_scene:frame", str(tmp_path / "o.mkv"), "--frames", "8"]
    rc = main([*args, "--size", "16x12", "--codec", "ffv1"])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert len(err.splitlines()) == 1
    assert "frame 0 from frame(0) is 8x8, 3 channels, uint8, expected 16x12, 3 channels" in err
    assert "--size on the command line" in err and "before it" not in err


def test_an_iterable_with_a_given_spec_names_the_spec() -> None:
    frames = [np.zeros((5, 4), np.uint8)]
    with pytest.raises(FrameError, match=r"expected 4x4 uint8 as the spec= given says"):
        Pipeline.from_frames(iter(frames), spec=FrameSpec((4, 4))).run()
