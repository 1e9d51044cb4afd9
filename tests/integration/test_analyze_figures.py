"""analyze prints figures that mean something: small shares with significant digits, and
a pay-off verdict that agrees with its threshold and with the number it prints."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import av
import numpy as np
import pytest

import hyperframes._estimate as estimate_module
from hyperframes._estimate import WINDOW, WindowSizes
from hyperframes.analysis import WORTHWHILE_SAVING, analyze, percent, verdict
from hyperframes.cli import main
from hyperframes.io.arrays import ArraySource

pytestmark = pytest.mark.usefixtures("no_thread_leak")

REASON = re.compile(
    r"stores (?P<grouped>[\d.]+)% of raw vs (?P<independent>[\d.]+)% for zstd per frame: "
    r"(?P<saving>[\d.]+)% (?P<way>smaller|larger)"
)


@pytest.fixture
def fade_clip(tmp_path: Path) -> Path:
    """100 black 256x192 frames, then 20 fading in to grey: mostly black, as after a fade
    out. Both codecs store it in well under 0.1 % of raw, which printed as 0.0 %."""
    path = tmp_path / "fade.mp4"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 256, 192, "yuv420p"
        for i in range(120):
            level = 0 if i < 100 else (i - 99) * 6
            frame = np.full((192, 256, 3), level, np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(frame, format="rgb24")))
        container.mux(stream.encode(None))
    return path


def figures(capsys: pytest.CaptureFixture[str], clip: Path) -> tuple[str, dict[str, Any]]:
    assert main(["analyze", str(clip)]) == 0
    text = capsys.readouterr().out
    assert main(["analyze", str(clip), "--json"]) == 0
    return text, json.loads(capsys.readouterr().out)


def test_a_mostly_black_clip_prints_shares_that_are_not_zero(
    fade_clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, data = figures(capsys, fade_clip)
    found = REASON.search(text)
    assert found, text
    estimate = data["estimate"]
    for key, name in (("grouped", "stored_ratio"), ("independent", "per_frame_zstd_ratio")):
        shown, actual = float(found[key]), estimate[name] * 100
        assert 0 < actual < 0.5  # a black clip compresses far below 1 % of raw...
        assert shown == pytest.approx(actual, rel=0.01)  # ...and the line says how far
        assert found[key] != "0.0"
    assert "0.0%" not in text.split("worthwhile:")[1].split("\n")[0]


def test_the_verdict_agrees_with_the_printed_saving(
    fade_clip: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text, data = figures(capsys, fade_clip)
    found = REASON.search(text)
    assert found, text
    saving = float(found["saving"]) * (1 if found["way"] == "smaller" else -1)
    assert data["worthwhile"] is (saving >= 100 * WORTHWHILE_SAVING)
    assert ("worthwhile: yes" in text) is data["worthwhile"]
    assert data["estimate"]["saving_vs_per_frame"] * 100 == pytest.approx(saving, rel=0.01)


@pytest.mark.parametrize(
    ("grouped", "independent", "printed", "worthwhile"),
    [
        (9004, 10000, "9.96% smaller (under the 10% that pays off)", False),
        (90004, 100000, "9.996% smaller (under the 10% that pays off)", False),
        (9000, 10000, "10.0% smaller (at least the 10% that pays off)", True),
        (89996, 100000, "10.004% smaller (at least the 10% that pays off)", True),
        (10500, 10000, "5.00% larger (hyperframes pay off from 10% smaller)", False),
    ],
)
def test_the_threshold_is_compared_unrounded_and_shown(
    monkeypatch: pytest.MonkeyPatch, grouped: int, independent: int, printed: str, worthwhile: bool
) -> None:
    def measure(frames: np.ndarray) -> WindowSizes:  # the window is the whole hyperframe
        raw = independent // len(frames)
        return WindowSizes(0, (raw, grouped - raw, *[0] * (len(frames) - 2)), 0)

    monkeypatch.setattr(estimate_module, "measure_window", measure)
    frames = np.zeros((WINDOW, 8, 8, 3), np.uint8)  # one hyperframe, one window: no scaling
    result, _ = analyze(ArraySource(frames), samples=1)
    assert result.reason.endswith(printed)
    assert result.worthwhile is worthwhile


@pytest.mark.parametrize(
    ("share", "text"),
    [
        (0.153, "15.3%"),
        (0.000123, "0.0123%"),
        (0.0, "0%"),
        (1.0, "100%"),
        (0.09996, "10.0%"),
        (0.0312, "3.12%"),
    ],
)
def test_percent_keeps_three_significant_digits(share: float, text: str) -> None:
    assert percent(share) == text


def test_verdict_never_prints_the_threshold_for_a_saving_under_it() -> None:
    for saving in np.linspace(0.0999, 0.1001, 41).tolist():
        line = verdict(saving)
        shown = float(line.split("%")[0])
        assert (shown >= 10) is (saving >= WORTHWHILE_SAVING), line
        assert ("at least" in line) is (saving >= WORTHWHILE_SAVING), line
