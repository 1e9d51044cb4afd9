"""Image sequences are inputs on every command (issue 50): a folder of images, a printf
pattern or a glob is one input; ``--rate`` gives its frame rate; 16-bit samples and alpha
are kept where the output holds them (FFV1, PNG, a store) and refused in one line where it
cannot (never dropped silently); ``unpack`` names the images as the input named them."""

from __future__ import annotations

import json
from pathlib import Path

import av
import cv2
import numpy as np
import pyarrow.parquet as pq
import pytest

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.io.inputs import is_image_sequence, is_many

COUNT = 12
FUNCTION = """
def brightness(frames):
    return [round(float(f.mean()), 6) for f in frames]
"""


def write_sequence(folder: Path, *, dtype=np.uint8, channels=3, first=1, name="frame_{:04d}.png"):
    """``COUNT`` images of 96x64 noise (RGB order in memory), each different; returns them."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(7)
    top = 65535 if dtype == np.uint16 else 255
    frames = [rng.integers(0, top, (64, 96, channels), dtype=dtype, endpoint=True)
              for _ in range(COUNT)]  # fmt: skip
    to_bgr = {3: cv2.COLOR_RGB2BGR, 4: cv2.COLOR_RGBA2BGRA}
    for k, frame in enumerate(frames):
        assert cv2.imwrite(
            str(folder / name.format(first + k)), cv2.cvtColor(frame, to_bgr[channels])
        )
    return frames


def read_video(path: Path, fmt: str) -> tuple[list[np.ndarray], av.VideoStream]:
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        frames = [f.to_ndarray(format=fmt) for f in container.decode(stream)]
        return frames, stream


@pytest.fixture
def deep(tmp_path: Path, monkeypatch) -> list[np.ndarray]:
    """``frames/frame_0001.png`` ... 16-bit RGBA; the working folder is ``tmp_path``."""
    monkeypatch.chdir(tmp_path)
    return write_sequence(tmp_path / "frames", dtype=np.uint16, channels=4)


def test_what_names_one_sequence(tmp_path: Path) -> None:
    write_sequence(tmp_path / "frames")
    for spec in ("frames", "frames/frame_%04d.png", "frames/*.png"):
        path = str(tmp_path / spec)
        assert is_image_sequence(path) and not is_many(path), spec
    assert not is_image_sequence(str(tmp_path))  # a folder of folders is not one sequence


def test_one_image_of_a_sequence_is_refused_one_alone_is_read(deep, tmp_path, capsys) -> None:
    """Reading ``frame_0001.png`` of 12 is more likely a slip than the wish: refused with
    the pattern to name; an image with no numbered siblings is a sequence of one."""
    assert main(["transcode", "frames/frame_0001.png", "one.mkv", "--codec", "ffv1"]) == 1
    err = capsys.readouterr().err
    assert "frame_%04d.png" in err and f"({COUNT} images)" in err
    assert not (tmp_path / "one.mkv").exists()
    (tmp_path / "alone").mkdir()
    (tmp_path / "frames" / "frame_0003.png").rename(tmp_path / "alone" / "cover.png")
    assert main(["transcode", "alone/cover.png", "one.mkv", "--codec", "ffv1"]) == 0
    frames, _ = read_video(tmp_path / "one.mkv", "rgba64le")
    assert len(frames) == 1 and np.array_equal(frames[0], deep[2])


def test_names_in_number_order(tmp_path: Path) -> None:
    """``f_2.png`` comes before ``f_10.png`` whether named by a folder, a glob or a pattern."""
    frames = write_sequence(tmp_path / "f", name="f_{}.png", first=1)
    for spec in ("f", "f/*.png", "f/f_%d.png"):
        got = hf.Pipeline.from_source(hf.ImageSequenceSource(tmp_path / spec)).collect()
        assert all(np.array_equal(a, b) for a, b in zip(got, frames, strict=True)), spec


def test_transcode_keeps_16_bits_and_alpha_in_ffv1(deep, tmp_path: Path) -> None:
    assert main(["transcode", "frames", "out.mkv", "--codec", "ffv1", "--rate", "24"]) == 0
    frames, stream = read_video(tmp_path / "out.mkv", "rgba64le")
    assert len(frames) == COUNT and stream.average_rate == 24
    assert all(np.array_equal(a, b) for a, b in zip(frames, deep, strict=True))


@pytest.mark.parametrize(
    ("output", "extra", "says"),
    [
        ("out.mp4", [], "alpha"),  # libx264 yuv420p holds neither alpha nor 16 bits
        ("out.webm", ["--codec", "libvpx-vp9"], "alpha"),
        ("jpg/", [], "JPEG"),  # unpack below; transcode writes video
    ],
)
def test_refused_in_one_line_not_dropped(deep, tmp_path: Path, capsys, output, extra, says):
    if output.endswith("/"):
        assert main(["pack", "frames", "st.hfs"]) == 0
        capsys.readouterr()
        command = ["unpack", "st.hfs", output, "--pattern", "f_%04d.jpg"]
    else:
        command = ["transcode", "frames", output, *extra]
    assert main(command) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and says in err[0], err
    assert not (tmp_path / output).exists() or not any((tmp_path / output).iterdir())


def test_dropping_alpha_is_asked_for(deep, tmp_path: Path) -> None:
    """``--pix-fmt`` chooses what the encoder keeps: then the user asked for the loss."""
    assert main(["transcode", "frames/frame_%04d.png", "out.mp4", "--pix-fmt", "yuv420p"]) == 0
    frames, _ = read_video(tmp_path / "out.mp4", "rgb24")
    assert len(frames) == COUNT


def test_map_rows_have_times_from_the_rate(tmp_path: Path, monkeypatch) -> None:
    frames = write_sequence(tmp_path / "frames")
    (tmp_path / "brightness_fn.py").write_text(FUNCTION)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    command = ["map", "frames/*.png", "brightness_fn:brightness", "--out", "r.parquet"]
    assert main([*command, "--rate", "10"]) == 0
    rows = pq.read_table(tmp_path / "r.parquet").to_pylist()
    assert [r["frame"] for r in rows] == list(range(COUNT))
    assert [r["time"] for r in rows] == pytest.approx([k / 10 for k in range(COUNT)])
    assert [r["value"] for r in rows] == [round(float(f.mean()), 6) for f in frames]


def test_pack_unpack_keeps_depth_alpha_rate_and_names(deep, tmp_path: Path, capsys) -> None:
    assert main(["pack", "frames", "st.hfs", "--rate", "30000/1001"]) == 0
    capsys.readouterr()
    assert main(["info", "st.hfs", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["source"]["rate"] == "30000/1001"
    assert main(["unpack", "st.hfs", "out"]) == 0
    names = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert names == [f"frame_{k:04d}.png" for k in range(1, COUNT + 1)]
    for k, want in enumerate(deep, start=1):
        got = cv2.imread(str(tmp_path / "out" / f"frame_{k:04d}.png"), cv2.IMREAD_UNCHANGED)
        assert got.dtype == np.uint16 and np.array_equal(
            cv2.cvtColor(got, cv2.COLOR_BGRA2RGBA), want
        )
    assert main(["unpack", "st.hfs", "again", "--pattern", "img_%03d.png"]) == 0
    assert sorted(p.name for p in (tmp_path / "again").iterdir())[0] == "img_000.png"
    assert main(["unpack", "st.hfs", "deep.mkv"]) == 0  # ffv1: all 16 bits and the alpha
    frames, stream = read_video(tmp_path / "deep.mkv", "rgba64le")
    assert all(np.array_equal(a, b) for a, b in zip(frames, deep, strict=True))
    assert stream.average_rate == pytest.approx(30000 / 1001)


def test_info_describes_a_sequence(deep, capsys) -> None:
    assert main(["info", "frames/frame_%04d.png", "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    assert facts["frames"] == COUNT and (facts["width"], facts["height"]) == (96, 64)
    assert facts["bits"] == 16 and facts["alpha"] is True and facts["first"] == "frame_0001.png"


@pytest.mark.parametrize("command", ["info", "transcode", "map", "pack"])
def test_a_folder_of_neither_says_so(tmp_path: Path, monkeypatch, capsys, command) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("hello")
    monkeypatch.chdir(tmp_path)
    argv = {"info": ["info", "notes"], "transcode": ["transcode", "notes", "out.mp4"],
            "map": ["map", "notes", "numpy:mean", "--out", "r.jsonl"],
            "pack": ["pack", "notes", "st.hfs"]}[command]  # fmt: skip
    assert main(argv) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "video" in err[0] and "image" in err[0], err


def test_rate_belongs_to_sequences(clip_path, tmp_path: Path, capsys) -> None:
    assert main(["transcode", str(clip_path("bikes.mp4")), str(tmp_path / "o.mp4"),
                 "--rate", "10"]) == 1  # fmt: skip
    assert "drop --rate" in capsys.readouterr().err


def test_transcode_into_images_keeps_the_names(deep, tmp_path: Path) -> None:
    """A sequence into a folder keeps its names (and depth, alpha); a pattern names them."""
    assert main(["transcode", "frames", "small/", "--size", "48x32"]) == 0
    names = sorted(p.name for p in (tmp_path / "small").iterdir())
    assert names == [f"frame_{k:04d}.png" for k in range(1, COUNT + 1)]
    got = cv2.imread(str(tmp_path / "small" / "frame_0005.png"), cv2.IMREAD_UNCHANGED)
    assert got.shape == (32, 48, 4) and got.dtype == np.uint16
    assert main(["transcode", "frames/frame_%04d.png", "some/f_%03d.png", "--start", "2",
                 "--stop", "5"]) == 0  # fmt: skip
    assert sorted(p.name for p in (tmp_path / "some").iterdir()) == [
        "f_002.png",
        "f_003.png",
        "f_004.png",
    ]  # by frame index, as a video's frames would be
    assert main(["transcode", "frames", "one.png"]) == 2  # one name for many frames


def test_a_films_frames_into_images_say_what_was_left(make_film, tmp_path: Path, capsys):
    film = make_film(tmp_path / "film.mkv")
    command = ["transcode", str(film), str(tmp_path / "shots" / "%04d.png"), "--stop", "5"]
    assert main([*command, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    dropped = report["extra"]["streams"]["dropped"]
    assert {s["type"] for s in dropped} >= {"audio", "subtitle"}
    assert all("images" in s["why"] for s in dropped)
    assert sorted(p.name for p in (tmp_path / "shots").iterdir()) == [
        f"{k:04d}.png" for k in range(5)
    ]
    decoded = hf.Pipeline.from_source(hf.VideoSource(film, stop=5)).collect()
    written = hf.Pipeline.from_source(hf.ImageSequenceSource(tmp_path / "shots")).collect()
    np.testing.assert_array_equal(written, decoded)  # RGB frames, never the planes


def test_a_folder_of_shots_is_one_input_a_shot(tmp_path: Path, clip_path, monkeypatch, capsys):
    """A render's folder of shot folders (and a video beside them): each shot is one image
    sequence among the inputs, at --rate; the video keeps its own rate."""
    import shutil

    render = tmp_path / "render"
    write_sequence(render / "shot_a")
    write_sequence(render / "shot_b", first=100)
    shutil.copy(clip_path("bikes.mp4"), render / "bikes.mp4")
    (tmp_path / "shots_fn.py").write_text(FUNCTION)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    argv = ["map", "render", "shots_fn:brightness", "--out", "r.jsonl", "--size", "96x64"]
    assert main([*argv, "--rate", "12"]) == 0
    rows = [json.loads(line) for line in (tmp_path / "r.jsonl").read_text().splitlines()]
    counts = {Path(p).name: sum(r["path"] == p for r in rows) for p in {r["path"] for r in rows}}
    assert counts == {"bikes.mp4": 250, "shot_a": COUNT, "shot_b": COUNT}
    shot = [r["time"] for r in rows if r["path"].endswith("shot_b")]
    assert shot == pytest.approx([k / 12 for k in range(COUNT)])
    out = ["transcode", "render", "out", "--suffix", ".mkv", "--codec", "ffv1", "--rate", "12"]
    assert main(out) == 0
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == [
        "bikes.mkv",
        "shot_a.mkv",
        "shot_b.mkv",
    ]
    frames, stream = read_video(tmp_path / "out" / "shot_a.mkv", "rgb24")
    assert len(frames) == COUNT and stream.average_rate == 12
    capsys.readouterr()
    assert main(["info", "render", "--json"]) == 0
    facts = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert sorted(f.get("frames") for f in facts) == [COUNT, COUNT, 250]


@pytest.mark.parametrize(("stored", "kept"), [("gbrap16le", "rgba64le"), ("yuv420p10le", "rgb48le"),
                                              ("bgra", "rgba")])  # fmt: skip
def test_a_videos_alpha_and_deep_samples_are_kept_where_the_output_holds_them(
    deep, tmp_path: Path, capsys, stored, kept
) -> None:
    """A film's alpha and samples of more than 8 bits go through `transcode` to FFV1 and
    PNG, and through `pack` and `unpack` to PNG, bit for bit (as PyAV reads them); to
    H.264 alpha is refused in one line, and 10 or 16 bits become 8 with a warning line,
    never in silence."""
    with av.open(str(tmp_path / "in.mkv"), "w") as container:
        stream = container.add_stream("ffv1", rate=24)
        stream.width, stream.height, stream.pix_fmt = 96, 64, stored
        for frame in deep:
            image = av.VideoFrame.from_ndarray(frame, format="rgba64le").reformat(format=stored)
            for packet in stream.encode(image):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    want, _ = read_video(tmp_path / "in.mkv", kept)
    alpha = kept.startswith("rgba")
    assert main(["transcode", "in.mkv", "out.mkv", "--codec", "ffv1"]) == 0
    assert all(
        np.array_equal(a, b)
        for a, b in zip(read_video(tmp_path / "out.mkv", kept)[0], want, strict=True)
    )
    assert main(["transcode", "in.mkv", "png/f_%02d.png"]) == 0
    to_rgb = cv2.COLOR_BGRA2RGBA if alpha else cv2.COLOR_BGR2RGB
    pngs = [cv2.cvtColor(cv2.imread(str(p), cv2.IMREAD_UNCHANGED), to_rgb)
            for p in sorted((tmp_path / "png").iterdir())]  # fmt: skip
    assert len(pngs) == COUNT and all(np.array_equal(a, b) for a, b in zip(pngs, want, strict=True))
    # a store holds them too (its planes, or RGB), and gives them back to PNG images
    assert main(["pack", "in.mkv", "st.hfs"]) == 0
    assert main(["unpack", "st.hfs", "un/g_%02d.png"]) == 0
    back = [cv2.cvtColor(cv2.imread(str(p), cv2.IMREAD_UNCHANGED), to_rgb)
            for p in sorted((tmp_path / "un").iterdir())]  # fmt: skip
    assert [p.name for p in sorted((tmp_path / "un").iterdir())][:2] == ["g_00.png", "g_01.png"]
    assert len(back) == COUNT and all(np.array_equal(a, b) for a, b in zip(back, want, strict=True))
    capsys.readouterr()
    assert main(["unpack", "st.hfs", "un2/g_%02d.png", "--pattern", "h_%02d.png"]) == 1
    assert "names the images, and so does --pattern" in capsys.readouterr().err
    assert main(["frame", "st.hfs", "3", "one.png"]) == 0  # one frame of it, the same
    one = cv2.cvtColor(cv2.imread("one.png", cv2.IMREAD_UNCHANGED), to_rgb)
    assert np.array_equal(one, want[3])
    capsys.readouterr()
    code = main(["frame", "st.hfs", "3", "one.jpg"])  # alpha refused; 10 or 16 bits told
    err = capsys.readouterr().err
    assert (code, "JPEG cannot hold" in err) == (1, True) if alpha else "in 8 bits" in err
    code = main(["transcode", "in.mkv", "out.mp4"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    if alpha:
        assert code == 1 and len(err) == 1 and "alpha" in err[0] and not Path("out.mp4").exists()
    else:
        assert code == 0 and read_video(tmp_path / "out.mp4", "rgb24")[1].pix_fmt == "yuv420p"
        assert main(["transcode", "in.mkv", "o.mp4", "--json"]) == 0
        assert "10-bit samples are written in 8 bits" in " ".join(
            json.loads(capsys.readouterr().out)["warnings"]
        )
