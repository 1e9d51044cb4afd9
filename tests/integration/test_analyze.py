"""analyze on real and generated video: JSON keys, boundaries at cuts, the estimate."""

import json

import av
import numpy as np
import pytest

from hyperframes.analysis import recommend_threshold
from hyperframes.cli import main

pytestmark = pytest.mark.usefixtures("no_thread_leak")


@pytest.fixture
def cut_clip(tmp_path):
    """Three static noisy scenes of 30, 40 and 20 frames: cuts at 30 and 70 (lossless)."""
    rng = np.random.default_rng(0)
    path = tmp_path / "cuts.mkv"
    with av.open(str(path), "w") as c:
        s = c.add_stream("ffv1", rate=25)
        s.width, s.height, s.pix_fmt = 64, 48, "bgr0"
        for n in (30, 40, 20):
            base = rng.integers(30, 220, (48, 64, 3))
            for _ in range(n):
                img = np.clip(base + rng.integers(-2, 3, base.shape), 0, 255).astype(np.uint8)
                for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                    c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_analyze_json_keys_and_cuts(cut_clip, capsys):
    assert main(["analyze", str(cut_clip), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    for key in (
        "frames",
        "hyperframes",
        "mean_length",
        "merge_rate",
        "mse",
        "boundaries",
        "recommended_threshold",
        "worthwhile",
    ):
        assert key in data
    assert data["frames"] == 90
    assert set(data["mse"]) == {"median", "p90", "max"}
    assert {0, 30, 70} <= set(data["boundaries"])
    assert data["hyperframes"] == 3
    assert data["worthwhile"] is True  # static scenes: deltas beat zstd per frame
    assert data["estimate"]["stored_ratio"] < data["estimate"]["per_frame_zstd_ratio"]


def test_analyze_plot(cut_clip, capsys, tmp_path):
    pytest.importorskip("matplotlib")
    plot = tmp_path / "mse.png"
    assert main(["analyze", str(cut_clip), "--plot", str(plot)]) == 0
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_analyze_human_output(cut_clip, capsys):
    assert main(["analyze", str(cut_clip)]) == 0
    out = capsys.readouterr().out
    assert "90 frames -> 3 hyperframes" in out and "worthwhile: yes" in out


def test_recommended_threshold_rule():
    calm = np.full(100, 1e-5)
    assert recommend_threshold(calm) == pytest.approx(1e-4)
    busy = np.full(100, 0.05)
    assert recommend_threshold(busy) == pytest.approx(3e-3)
    assert 1e-4 <= recommend_threshold(np.array([np.nan, 4e-4, 5e-4])) <= 3e-3


def test_analyze_bad_threshold_is_one_line(cut_clip, capsys):
    assert main(["analyze", str(cut_clip), "--threshold", "2"]) == 1
    err = capsys.readouterr().err
    assert "threshold must be in (0, 1]" in err and len(err.strip().splitlines()) == 1
