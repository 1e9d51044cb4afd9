"""The progress line: what it shows with and without a known total, and a chunked run's note."""

from hyperframes.engine.runner import Progress
from hyperframes.metrics.progress import render_line


def test_a_known_total_shows_the_bar_the_share_and_the_eta():
    line = render_line(Progress(300, 900, 3.0, "map:blur"), "render")
    assert line.startswith("render [") and "300/900  33%" in line
    assert "100.0 fr/s  bottleneck: map:blur  ETA 00:06" in line


def test_an_unknown_total_shows_frames_only():
    assert (
        render_line(Progress(50, None, 0.0, "sink")) == "50 frames      0.0 fr/s  bottleneck: sink"
    )


def test_a_note_follows_the_bottleneck():
    line = render_line(Progress(300, 900, 3.0, "sink", "2/6 segments"))
    assert "bottleneck: sink  2/6 segments  ETA" in line
