"""The video commands end to end on real files: report keys, outputs, and bad input."""

import itertools
import json
import os
import textwrap
from pathlib import Path

import av
import numpy as np
import pytest

from hyperframes.cli import main

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def frames_in(path):
    with av.open(str(path)) as c:
        return [f.to_ndarray(format="rgb24") for f in c.decode(video=0)]


def run_json(capsys, *argv):
    assert main([*argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture
def small_clip(tmp_path):
    """A 40-frame 64x48 clip, lossless."""
    path = tmp_path / "in.mkv"
    with av.open(str(path), "w") as c:
        s = c.add_stream("ffv1", rate=25)
        s.width, s.height, s.pix_fmt = 64, 48, "bgr0"
        for i in range(40):
            img = np.full((48, 64, 3), (i * 5) % 256, np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_transcode_resize_and_report(tmp_path, small_clip, capsys):
    out = tmp_path / "out.mkv"
    data = run_json(
        capsys,
        "transcode",
        str(small_clip),
        str(out),
        "--codec",
        "ffv1",
        "--size",
        "32x24",
        "--batch-size",
        "8",
    )
    assert data["frames"] == 40 and data["output"] == str(out)
    for key in ("wall_s", "fps", "stages", "pool_high_water_bytes"):
        assert key in data
    assert [s["name"] for s in data["stages"]] == ["source", "sink"]  # resized as decoded
    got = frames_in(out)
    assert len(got) == 40 and got[0].shape == (24, 32, 3)
    assert [int(f[0, 0, 0]) for f in got] == [(i * 5) % 256 for i in range(40)]


def test_options_that_would_do_nothing_are_refused(tmp_path, small_clip, capsys):
    out = str(tmp_path / "out.mkv")
    assert main(["transcode", str(small_clip), out, "--workers", "2"]) == 2
    assert "--workers sets the threads of --map's function" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["unpack", "S", out, "--workers", "2"])  # not offered: the store decodes alone
    capsys.readouterr()
    for flags, says in (
        (["--preset", "fastest"], "--preset fastest is not one of libx264's: ultrafast"),
        (["--crf", "99"], "--crf 99 is outside libx264's range; pass 0 to 51"),
        (["--codec", "ffv1", "--crf", "20"], "ffv1 takes no crf"),
    ):
        assert main(["transcode", str(small_clip), out, *flags]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / "out.mkv").exists()


def test_transcode_loop_keeps_time_running(tmp_path, small_clip, capsys):
    out = tmp_path / "looped.mkv"
    data = run_json(
        capsys, "transcode", str(small_clip), str(out), "--codec", "ffv1", "--loop", "3"
    )
    assert data["frames"] == 120
    with av.open(str(out)) as c:
        times = [f.time for f in c.decode(video=0)]
    assert len(times) == 120 and all(b > a for a, b in itertools.pairwise(times))


def test_render_module_function(tmp_path, capsys, monkeypatch):
    (tmp_path / "scene.py").write_text(
        textwrap.dedent("""
        import numpy as np
        def frame(i):
            return np.full((16, 32, 3), i % 256, np.uint8)
    """)
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "r.mkv"
    data = run_json(
        capsys,
        "render",
        "scene:frame",
        str(out),
        "--frames",
        "50",
        "--size",
        "32x16",
        "--fps",
        "10",
        "--codec",
        "ffv1",
        "--workers",
        "2",
    )
    assert data["frames"] == 50
    assert [int(f[0, 0, 0]) for f in frames_in(out)] == list(range(50))


def leftovers(folder: Path, keep: set[str]) -> list[str]:
    return sorted(n for n in os.listdir(folder) if n not in keep)


@pytest.mark.parametrize(
    ("make_input", "argv_extra", "message"),
    [
        (lambda d: d / "missing.mp4", [], "missing.mp4"),
        (lambda d: _write(d / "notvideo.mp4", b"hello, not a video" * 100), [], "notvideo"),
        (lambda d: _write(d / "empty.mp4", b""), [], "empty"),
        (None, ["--codec", "nosuchcodec"], "codec"),
    ],
)
def test_transcode_bad_input_is_one_line(
    tmp_path, small_clip, capsys, make_input, argv_extra, message
):
    src = make_input(tmp_path) if make_input else small_clip
    out = tmp_path / "out.mp4"
    before = set(os.listdir(tmp_path))
    rc = main(["transcode", str(src), str(out), *argv_extra])
    err = capsys.readouterr().err.strip()
    assert rc == 1
    assert len(err.splitlines()) == 1 and err.startswith("hyperframes: error:")
    assert message in err.lower() or message in err
    assert leftovers(tmp_path, before) == []


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def test_existing_output_needs_overwrite(tmp_path, small_clip, capsys):
    out = tmp_path / "out.mkv"
    out.write_bytes(b"keep me")
    assert main(["transcode", str(small_clip), str(out), "--codec", "ffv1"]) == 1
    assert "overwrite" in capsys.readouterr().err
    assert out.read_bytes() == b"keep me"


def test_output_equal_to_input_is_refused(small_clip, capsys):
    assert main(["transcode", str(small_clip), str(small_clip)]) == 1
    assert "output is the input" in capsys.readouterr().err


def test_unwritable_output_folder(tmp_path, small_clip, capsys):
    assert main(["transcode", str(small_clip), str(tmp_path / "nope" / "out.mkv")]) == 1
    assert "hyperframes: error:" in capsys.readouterr().err


def test_failing_stage_leaves_no_partial_output(tmp_path, small_clip, capsys):
    (tmp_path / "bad.py").write_text(
        textwrap.dedent("""
        import numpy as np
        def frame(i):
            if i == 30:
                raise RuntimeError("scene broke at 30")
            return np.zeros((16, 16, 3), np.uint8)
    """)
    )
    import sys

    sys.path.insert(0, str(tmp_path))
    try:
        before = set(os.listdir(tmp_path))
        rc = main(
            [
                "render",
                "bad:frame",
                str(tmp_path / "r.mp4"),
                "--frames",
                "64",
                "--size",
                "16x16",
                "--batch-size",
                "4",
            ]
        )
    finally:
        sys.path.remove(str(tmp_path))
    err = capsys.readouterr().err
    assert rc == 1 and "scene broke at 30" in err and "frames 28..31" in err
    assert leftovers(tmp_path, before) == []


@pytest.fixture
def yuv_clip(tmp_path):
    """A 30-frame 96x64 yuv420p H.264 clip of a moving gradient."""
    path = tmp_path / "yuv.mp4"
    with av.open(str(path), "w") as c:
        s = c.add_stream("libx264", rate=25, options={"qp": "0", "preset": "ultrafast"})
        s.width, s.height, s.pix_fmt = 96, 64, "yuv420p"
        x = np.arange(96)[None, :, None]
        y = np.arange(64)[:, None, None]
        for i in range(30):
            img = ((x * 2 + y + 3 * i) % 256 * np.ones((1, 1, 3))).astype(np.uint8)
            for p in s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")):
                c.mux(p)
        for p in s.encode():
            c.mux(p)
    return path


def test_yuv_transcode_skips_colour_conversion_and_matches_the_rgb_path(tmp_path, yuv_clip, capsys):
    from hyperframes.io.probe import probe
    from hyperframes.transcoding import planar_path

    assert planar_path(probe(yuv_clip), {"size": (48, 32)}, None, {})
    fast, slow = tmp_path / "fast.mp4", tmp_path / "slow.mp4"
    run_json(capsys, "transcode", str(yuv_clip), str(fast), "--size", "48x32", "--crf", "0")
    run_json(
        capsys,
        "transcode",
        str(yuv_clip),
        str(slow),
        "--size",
        "48x32",
        "--crf",
        "0",
        "--pix-fmt",
        "yuv420p",
        "--codec",
        "libx264",
    )  # same settings: also planar
    a, b = np.stack(frames_in(fast)).astype(float), np.stack(frames_in(slow)).astype(float)
    assert a.shape == (30, 32, 48, 3)
    np.testing.assert_array_equal(a, b)
    # against the RGB path (resize after conversion): close, not identical
    rgb = tmp_path / "rgb.mkv"
    run_json(capsys, "transcode", str(yuv_clip), str(rgb), "--size", "48x32", "--codec", "ffv1")
    c = np.stack(frames_in(rgb)).astype(float)
    mse = ((a - c) ** 2).mean()
    assert 10 * np.log10(255**2 / mse) > 30


def test_1080p_to_720p_stays_in_yuv420p_planes(tmp_path, capsys, monkeypatch):
    # a 1.5x downscale (as in benchmarks/transcode.py) keeps the planar path too
    import hyperframes.io.video as cli_video

    clip = tmp_path / "hd.mp4"
    with av.open(str(clip), "w") as c:
        s = c.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        s.width, s.height, s.pix_fmt = 1920, 1080, "yuv420p"
        for i in range(6):
            img = np.full((1080, 1920, 3), 40 * i, np.uint8)
            c.mux(s.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        c.mux(s.encode(None))
    formats = []

    class Recording(cli_video.VideoSource):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            formats.append(self.pix_fmt)

    monkeypatch.setattr(cli_video, "VideoSource", Recording)
    out = tmp_path / "720.mp4"
    data = run_json(capsys, "transcode", str(clip), str(out), "--size", "1280x720")
    assert data["frames"] == 6 and formats[-1] == "yuv420p"
    back = frames_in(out)
    assert len(back) == 6 and back[0].shape == (720, 1280, 3)
    np.testing.assert_allclose([f.mean() for f in back], [40 * i for i in range(6)], atol=3)


def test_a_source_iterates_frame_by_frame(small_clip):
    from hyperframes import VideoSource

    frames = list(VideoSource(small_clip, stop=5))
    assert len(frames) == 5 and frames[0].shape == (48, 64, 3)
    assert [int(f[0, 0, 0]) for f in frames] == [(i * 5) % 256 for i in range(5)]
    assert len(list(VideoSource(small_clip, stop=5))) == 5  # again, from the start


def test_pack_resume_of_a_finished_store_says_so(tmp_path, small_clip, capsys):
    store = str(tmp_path / "s.hfs")
    assert main(["pack", str(small_clip), store, "--json"]) == 0
    capsys.readouterr()
    assert main(["pack", str(small_clip), store, "--resume"]) == 0
    assert capsys.readouterr().out.strip() == f"{store} is complete (40 frames); nothing to resume"
