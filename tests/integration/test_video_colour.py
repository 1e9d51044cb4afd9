"""VideoSource colour conversion: colour="ffmpeg" (the default) is FFmpeg's own rgb24,
pixel for pixel; the fast path differs from it by what the docstring says (bigbuckbunny,
bikes).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

import hyperframes.io.convert as convert_module
from hyperframes import Pipeline
from hyperframes.io.video import VideoSource


def pyav_frames(path: Path, fmt: str) -> np.ndarray:
    """The frames as PyAV converts them, independent of the code under test."""
    with av.open(str(path)) as container:
        return np.stack([f.to_ndarray(format=fmt) for f in container.decode(video=0)])


def source_frames(path: Path, **options: object) -> np.ndarray:
    source = VideoSource(path, **options)  # type: ignore[arg-type]
    return Pipeline.from_source(source, batch_size=16).collect()


@pytest.mark.parametrize("fmt", ["rgb24", "rgba"])
def test_ffmpeg_colour_is_pyav_rgb_exactly(synthetic_mp4: Path, fmt: str) -> None:
    expected = pyav_frames(synthetic_mp4, fmt)
    got = source_frames(synthetic_mp4, pix_fmt=fmt, colour="ffmpeg")
    np.testing.assert_array_equal(got, expected)


@pytest.mark.slow  # 9-15 s a clip; the default run checks it on a synthetic clip above
@pytest.mark.parametrize("name", ["bigbuckbunny.mp4", "bikes.mp4"])
def test_ffmpeg_colour_is_pyav_rgb_exactly_on_real_clips(
    clip_path: Callable[[str], Path], name: str
) -> None:
    path = clip_path(name)
    np.testing.assert_array_equal(source_frames(path, colour="ffmpeg"), pyav_frames(path, "rgb24"))


@pytest.mark.parametrize(
    ("name", "largest", "mean"),
    [pytest.param("bigbuckbunny.mp4", 16, 1.03, marks=pytest.mark.slow), ("bikes.mp4", 3, 1.15)],
)  # the larger clip in the slow run
def test_fast_colour_differs_as_documented(
    clip_path: Callable[[str], Path], name: str, largest: int, mean: float
) -> None:
    path = clip_path(name)
    fast = source_frames(path, colour="fast")
    diff = np.abs(fast.astype(np.int16) - pyav_frames(path, "rgb24"))
    assert int(diff.max()) == largest
    assert float(diff.mean()) == pytest.approx(mean, abs=0.01)
    doc = " ".join((convert_module.__doc__ or "").split())  # the figures the note states
    assert "mean 1.03 levels on bigbuckbunny and 1.15 on bikes" in doc
    assert "maximum is 16 on bigbuckbunny and 3 on bikes" in doc


def test_ffmpeg_colour_with_resize_resizes_ffmpeg_pixels(synthetic_mp4: Path) -> None:
    expected = [
        cv2.resize(f, (32, 24), interpolation=cv2.INTER_AREA)
        for f in pyav_frames(synthetic_mp4, "rgb24")
    ]
    got = source_frames(synthetic_mp4, colour="ffmpeg", size=(32, 24))
    np.testing.assert_array_equal(got, np.stack(expected))


def test_unknown_colour_is_refused(synthetic_mp4: Path) -> None:
    with pytest.raises(
        ValueError, match=r"colour must be one of \['fast', 'ffmpeg'\], got 'exact'"
    ):
        VideoSource(synthetic_mp4, colour="exact")  # type: ignore[arg-type]


def test_the_cli_takes_ffmpeg_colour(synthetic_mp4: Path, tmp_path: Path, monkeypatch) -> None:
    """``map``: the function sees FFmpeg's pixels (a model's baseline's), by default and
    with ``--colour ffmpeg``; ``--colour fast`` gives OpenCV's, which differ."""
    import json

    from hyperframes.cli import main

    (tmp_path / "sums_fn.py").write_text(
        "def sums(frames):\n    return [int(f.astype('int64').sum()) for f in frames]\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    want = [int(f.astype(np.int64).sum()) for f in pyav_frames(synthetic_mp4, "rgb24")]
    got = {}
    for colour in ("ffmpeg", "fast", None):
        out = tmp_path / f"{colour}.jsonl"
        chosen = [] if colour is None else ["--colour", colour]
        assert main(["map", str(synthetic_mp4), "sums_fn:sums", "--out", str(out),
                     *chosen]) == 0  # fmt: skip
        got[colour] = [json.loads(line)["value"] for line in out.read_text().splitlines()]
    assert got["ffmpeg"] == want == got[None] and got["fast"] != want
