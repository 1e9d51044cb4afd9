"""analyze on real and generated video: JSON keys, boundaries at cuts, the estimate."""

import json

import av
import numpy as np
import pytest

import hyperframes._estimate as estimate_module
from hyperframes._estimate import plan_samples
from hyperframes.analysis import analyze, recommend_threshold
from hyperframes.cli import main
from hyperframes.frames import FrameSpec
from hyperframes.io.arrays import ArraySource, IterableSource

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


# -- the size estimate: off with --samples 0, bounded, spread, errors that surface -------------


def scenes(count: int, length: int, shape: tuple[int, ...] = (48, 64, 3)) -> np.ndarray:
    """``count`` static noisy scenes of ``length`` frames each; frame i holds i in pixel 0."""
    rng = np.random.default_rng(1)
    frames = []
    for _ in range(count):
        base = rng.integers(30, 220, shape)
        for _ in range(length):
            frames.append(np.clip(base + rng.integers(-2, 3, shape), 0, 255).astype(np.uint8))
    out = np.stack(frames)
    out[:, 0, 0, 0] = np.arange(len(out)) % 256
    out[:, 0, 0, 1] = np.arange(len(out)) // 256
    return out


def recording(monkeypatch: pytest.MonkeyPatch) -> list[np.ndarray]:
    """Every window the estimate encodes, in order (the real measurement still runs)."""
    seen: list[np.ndarray] = []
    real = estimate_module.measure_window

    def measure(frames: np.ndarray) -> estimate_module.WindowSizes:
        seen.append(frames.copy())
        return real(frames)

    monkeypatch.setattr(estimate_module, "measure_window", measure)
    return seen


def test_samples_0_turns_the_estimate_off(cut_clip, capsys, monkeypatch):
    assert main(["analyze", str(cut_clip), "--json"]) == 0
    full = json.loads(capsys.readouterr().out)
    encoded = recording(monkeypatch)
    assert main(["analyze", str(cut_clip), "--samples", "0", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert encoded == []  # nothing encoded at all
    assert data["worthwhile"] is None and data["estimate"] == {"method": "off"}
    for key in ("frames", "hyperframes", "boundaries", "mse", "recommended_threshold"):
        assert data[key] == full[key]  # the analysis itself does not change
    assert main(["analyze", str(cut_clip), "--samples", "0"]) == 0
    assert "worthwhile: not estimated (--samples 0)" in capsys.readouterr().out


def test_negative_samples_is_refused_in_one_line(cut_clip, capsys):
    with pytest.raises(SystemExit):
        main(["analyze", str(cut_clip), "--samples", "-1"])
    assert "at least 0" in capsys.readouterr().err
    with pytest.raises(ValueError, match="samples must be"):
        analyze(ArraySource(scenes(1, 4)), samples=-1)


@pytest.mark.parametrize("known_length", [True, False])
def test_the_estimate_encodes_a_bounded_share_spread_over_the_input(monkeypatch, known_length):
    """With the floor lowered so that the share binds: at most SHARE of the frames' bytes is
    encoded, in at most ``samples`` windows of at most WINDOW frames, from both halves of the
    input (known length) and from the hyperframes the windows say."""
    frames = scenes(20, 100)  # 2000 frames of 9 KiB, 20 hyperframes of 100 frames
    monkeypatch.setattr(estimate_module, "MIN_BYTES", frames[0].nbytes)
    encoded = recording(monkeypatch)
    source = ArraySource(frames) if known_length else IterableSource(iter(frames))
    result, _ = analyze(source, max_len=100)
    assert result.hyperframes == 20
    total = frames.nbytes
    bound = estimate_module.SHARE * total
    assert 0 < sum(w.nbytes for w in encoded) <= bound
    assert 1 <= len(encoded) <= 12 and all(len(w) <= estimate_module.WINDOW for w in encoded)
    estimate = result.estimate
    assert estimate["encoded_frames"] == sum(len(w) for w in encoded)
    assert estimate["sampled_hyperframes"] == len(encoded)
    assert estimate["sampled_frames"] == 100 * len(encoded)  # each window's hyperframe
    assert 0 < estimate["encoded_share"] <= estimate_module.SHARE
    assert "windows of up to 4 frames" in estimate["method"]
    firsts = [int(w[0, 0, 0, 0]) + 256 * int(w[0, 0, 0, 1]) for w in encoded]
    for w, first in zip(encoded, firsts, strict=True):  # consecutive frames of one hyperframe
        ids = w[:, 0, 0, 0].astype(int) + 256 * w[:, 0, 0, 1].astype(int)
        assert ids.tolist() == list(range(first, first + len(w)))
        assert first // 100 == (first + len(w) - 1) // 100
    if known_length:
        assert min(firsts) < 1000 <= max(firsts)
    assert result.worthwhile is True  # static scenes: deltas beat zstd per frame


def test_the_floor_lets_a_short_input_sample_every_window():
    """A short input encodes up to MIN_BYTES, so it gets ``samples`` windows, not one."""
    result, _ = analyze(ArraySource(scenes(12, 10)), samples=12)
    assert result.estimate["sampled_hyperframes"] == 12
    assert result.estimate["sampled_frames"] == 120
    assert result.estimate["encoded_frames"] == 48


def test_large_frames_are_sampled_by_strips_of_rows(monkeypatch):
    frames = scenes(2, 8, shape=(512, 512, 3))  # 768 KiB frames: one strip by default
    encoded = recording(monkeypatch)
    monkeypatch.setattr(estimate_module, "STRIP_BYTES", 128 << 10)  # 6 strips of 85 rows
    result, _ = analyze(ArraySource(frames))
    assert result.estimate["strips"] == 6
    assert encoded and all(w.shape[1:] == (85, 512, 3) for w in encoded[:1])
    assert {w.shape[1] for w in encoded} <= {85, 86}
    assert "1/6 of the rows each" in result.reason


def test_an_encoder_failure_stops_analyze_with_its_own_error(monkeypatch):
    def broken(frames: np.ndarray) -> estimate_module.WindowSizes:
        raise OSError("disk on fire")

    monkeypatch.setattr(estimate_module, "measure_window", broken)
    with pytest.raises(OSError, match="disk on fire"):
        analyze(ArraySource(scenes(3, 10)))


def test_plan_bounds_the_encoded_bytes():
    spec = FrameSpec((720, 1280, 3))
    for length in (1, 3, 4, 90, 720, 18_000, 200_000):
        plan = plan_samples(length, spec, samples=12)
        encoded = plan.budget * plan.piece_bytes
        assert encoded <= max(
            estimate_module.MIN_BYTES, estimate_module.SHARE * length * spec.nbytes
        )
        assert len(plan.starts) <= 12 and list(plan.starts) == sorted(set(plan.starts))
        assert all(0 <= s < length for s in plan.starts)
    assert plan_samples(720, spec, samples=0).starts == ()
    unknown = plan_samples(None, spec, samples=12)
    taken = 0
    while (start := unknown.start(taken)) is not None:
        spent = (taken + 1) * estimate_module.WINDOW * unknown.piece_bytes
        allowed = max(estimate_module.MIN_BYTES, estimate_module.SHARE * start * spec.nbytes)
        assert spent <= allowed + estimate_module.SHARE * spec.nbytes  # start is rounded up
        taken += 1
    assert taken == 12


def test_analyze_describes_what_a_default_pack_does(clip_path, tmp_path, capsys):
    """The same frames (the decoder's planes) and the same longest group as ``pack``."""
    from hyperframes.cli import main

    for name in ("bigbuckbunny.mp4", "bikes.mp4"):
        clip = str(clip_path(name))
        assert main(["analyze", clip, "--json", "--samples", "0"]) == 0
        found = json.loads(capsys.readouterr().out)
        assert main(["pack", clip, str(tmp_path / f"{name}.hfs"), "--json"]) == 0
        packed = json.loads(capsys.readouterr().out)
        assert found["hyperframes"] == packed["hyperframes"], name
        assert found["frames_as"] == "yuv420p" and found["max_len"] == 60
    assert main(["analyze", clip, "--samples", "0"]) == 0
    assert "as pack stores it by default: yuv420p frames" in capsys.readouterr().out


@pytest.mark.slow  # every store mode estimated: 5 s
def test_analyze_estimates_every_store_mode_and_names_the_smallest(clip_path, tmp_path, capsys):
    """On the planes of a moving clip: each mode's size near what a pack of it stores, the
    x264 mode the smallest and the gradient the fastest to read."""
    clip = str(clip_path("bikes.mp4"))
    assert main(["analyze", clip, "--json"]) == 0
    modes = {m["intra"]: m for m in json.loads(capsys.readouterr().out)["store_modes"]}
    assert set(modes) == {"gradient", "ffv1", "x264"} and modes["x264"]["gop"] == 32
    assert modes["x264"]["ratio"] < modes["ffv1"]["ratio"] < modes["gradient"]["ratio"] < 1
    assert modes["gradient"]["access_ms"] < modes["x264"]["access_ms"]
    for intra in ("gradient", "x264"):  # the estimate against the store itself
        assert main(["pack", clip, str(tmp_path / intra), "--intra", intra, "--json"]) == 0
        stored = json.loads(capsys.readouterr().out)["ratio"]
        assert 0.75 < modes[intra]["ratio"] / stored < 1.35, (intra, modes[intra], stored)
    assert main(["analyze", clip]) == 0
    out = capsys.readouterr().out
    assert (
        "x264 --gop 32" in out and "smallest: --intra x264; fastest reads: --intra gradient" in out
    )


def test_no_store_modes_for_frames_stored_as_rgb_or_without_samples(cut_clip, capsys):
    assert main(["analyze", str(cut_clip), "--json"]) == 0  # bgr0: stored as RGB
    assert json.loads(capsys.readouterr().out)["store_modes"] == []
    assert main(["analyze", str(cut_clip)]) == 0
    assert "store modes" not in capsys.readouterr().out
