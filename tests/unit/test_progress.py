"""The progress line: what it shows with and without a known total, and a chunked run's note."""

from hyperframes.engine.watch import Progress
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


def test_the_line_fits_the_terminal_dropping_the_least_useful_fields_first():
    p = Progress(300, 900, 3.0, "map:blur", "calls saved 47%")
    full = render_line(p, "transcode")
    assert len(full) > 100 and render_line(p, "transcode", 200) == full
    for width in (100, 80, 60, 40, 20, 5):
        line = render_line(p, "transcode", width)
        assert len(line) < width and "300/900"[: width - 1] in line, (width, line)
    assert (
        render_line(p, "transcode", 80) == "300/900  33%    100.0 fr/s  calls saved 47%  ETA 00:06"
    )
    assert render_line(p, "transcode", 40) == "300/900  33%    100.0 fr/s  ETA 00:06"


def test_the_bar_asks_the_terminal_its_width_at_each_redraw(monkeypatch):
    import io
    import os

    from hyperframes.metrics.progress import ProgressBar

    out = io.StringIO()
    bar = ProgressBar(label="transcode", stream=out, enabled=True, hz=1e9)
    for columns in (120, 60):
        monkeypatch.setattr(
            "shutil.get_terminal_size", lambda *a, c=columns: os.terminal_size((c, 24))
        )
        bar(Progress(300, 900, 3.0, "sink"))
    first, second = out.getvalue().split("\r\x1b[2K")[1:]
    assert len(first) < 120 and first.startswith("transcode [")
    assert len(second) < 60 and not second.startswith("transcode")
