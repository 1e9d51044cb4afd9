"""Frame *i* is the *i*-th frame the decoder gives, whatever the timestamps say: seeks for
``start``, resumes and chunk cuts land on it, checked, and output timestamps that would go
backwards are regenerated and counted."""

from __future__ import annotations

import json
import zlib
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.errors import MediaError
from hyperframes.io.frame_table import scan
from hyperframes.segments import video_frames
from hyperframes.store import writer as writer_module
from hyperframes.store.resume import resume_point
from hyperframes.store.writer import StoreWriter


def rate_change(path: Path, frames: np.ndarray, *, change: int, fmt: str | None = None) -> Path:
    """H.264 with B-frames at 25 fps for ``change`` frames, then 50 fps (plain PyAV)."""
    base = Fraction(1, 50)
    with av.open(str(path), "w", format=fmt) as container:
        stream = container.add_stream("libx264", rate=50)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "yuv420p"
        stream.codec_context.time_base = base
        stream.options = {"g": "48"}
        pts = 0
        for i, frame in enumerate(frames):
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts, video_frame.time_base = pts, base
            pts += 2 if i < change else 1
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    return path


def crcs(source: hf.VideoSource) -> tuple[list[int], list[int]]:
    ids: list[int] = []
    sums: list[int] = []
    with source:
        out = np.empty((16, *source.spec.shape), source.spec.dtype)
        while len(chunk := source.read_into(out)):
            ids += chunk.index.tolist()
            sums += [zlib.crc32(frame) for frame in out[: len(chunk)]]
    return ids, sums


@pytest.fixture(scope="module")
def changing(tmp_path_factory) -> tuple[Path, list[int]]:
    """600 frames whose rate doubles at frame 300 (past the first 240 packets), and the
    checksums of a read from the first frame."""
    frames = np.stack([np.roll(f, i, axis=1) for i, f in enumerate(_frames(600))])
    path = rate_change(tmp_path_factory.mktemp("rate") / "change.mp4", frames, change=300)
    return path, crcs(hf.VideoSource(path))[1]


def _frames(count: int) -> np.ndarray:
    rng = np.random.default_rng(3)
    base = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    return np.stack([np.roll(base, 2 * i, axis=0) for i in range(count)])


@pytest.mark.parametrize(("start", "stop"), [(380, 390), (100, 110), (299, 302), (590, None)])
def test_start_lands_on_the_frame_a_read_from_the_top_gives(changing, start, stop):
    path, whole = changing
    assert len(whole) == 600
    source = hf.VideoSource(path, start=start, stop=stop)
    ids, sums = crcs(source)
    assert ids == list(range(start, stop or 600)) and sums == whole[start:stop]
    assert source.notes()["seek"].endswith("checked frame by frame")


def test_the_packets_number_frames_past_a_rate_change(changing):
    path, _ = changing
    with av.open(str(path)) as container:
        table = scan(container, container.streams.video[0])
    assert table.untrusted is None and len(table.pts) == 600
    assert table.keyframes[0] == 0 and (np.diff(table.pts) > 0).all()
    with av.open(str(path)) as container:
        part = scan(container, container.streams.video[0], until=380)
    assert 380 < len(part.pts) < 600 and (part.pts == table.pts[: len(part.pts)]).all()


@pytest.fixture(scope="module")
def joined(tmp_path_factory) -> Path:
    """Two MPEG-TS files joined byte by byte: the timestamps restart at frame 120."""
    folder = tmp_path_factory.mktemp("joined")
    one = rate_change(folder / "one.ts", _frames(120), change=1000, fmt="mpegts")
    path = folder / "joined.ts"
    path.write_bytes(one.read_bytes() * 2)
    return path


def test_timestamps_going_backwards_are_decoded_from_the_top(joined):
    whole = crcs(hf.VideoSource(joined))[1]
    assert len(whole) == 240 and whole[:120] == whole[120:]
    source = hf.VideoSource(joined, start=130, stop=140)
    ids, sums = crcs(source)
    assert ids == list(range(130, 140)) and sums == whole[130:140]
    assert "timestamps go backwards" in source.notes()["seek"]
    with pytest.raises(MediaError, match=r"cannot be cut into segments.*without --chunks"):
        video_frames(joined)


def test_output_timestamps_are_regenerated_where_they_go_backwards(joined, tmp_path, capsys):
    out, report = tmp_path / "out.mkv", tmp_path / "report.json"
    assert main(["transcode", str(joined), str(out), "--codec", "ffv1",
                 "--report", str(report), "--json"]) == 0  # fmt: skip
    capsys.readouterr()
    with av.open(str(out)) as container:
        times = [frame.time for frame in container.decode(video=0)]
    steps = np.diff(times)
    assert len(times) == 240 and np.allclose(steps, 0.04)  # the clip's own spacing throughout
    assert json.loads(report.read_text())["extra"]["sink"] == {"retimed_frames": 1}


def test_pack_resume_after_a_rate_change_stores_every_frame_right(changing, tmp_path, monkeypatch):
    path, _ = changing
    full, part = tmp_path / "full.hfs", tmp_path / "part.hfs"
    assert main(["pack", str(path), str(full), "--max-len", "32"]) == 0
    real, seen = writer_module.encode_group, {"frames": 0}

    def failing(frames, **options):
        seen["frames"] += len(frames)
        if seen["frames"] > 400:
            raise OSError("the disk went away")
        return real(frames, **options)

    monkeypatch.setattr(writer_module, "encode_group", failing)
    assert main(["pack", str(path), str(part), "--max-len", "32", "--workers", "1"]) == 1
    monkeypatch.undo()
    done, complete = resume_point(part)
    assert 240 < done < 600 and not complete  # the resume seeks past the first 240 packets
    assert main(["pack", str(path), str(part), "--resume"]) == 0
    with hf.FrameStore(full) as a, hf.FrameStore(part) as b:
        assert len(a) == len(b) == 600 and not b.verify()
        for i in range(0, 600, 7):
            assert np.array_equal(a[i], b[i]), i


def test_resume_refuses_a_store_whose_last_frame_is_not_the_inputs(changing, tmp_path, capsys):
    path, _ = changing
    source = hf.VideoSource(path, stop=100)
    frames = hf.Pipeline.from_source(source).collect()
    store = tmp_path / "shifted.hfs"
    grouping = {"threshold": 0.02, "min_len": 8, "max_len": 32}
    writer = StoreWriter(store, source.spec, source.info, grouping=grouping)
    for start in range(1, 97, 32):  # frames 1..96 stored as 0..95: numbered one off
        writer.write_group(frames[start : start + 32].copy())
    writer.close(complete=False)
    assert resume_point(store) == (96, False)
    assert main(["pack", str(path), str(store), "--resume", "--pix-fmt", "rgb24"]) == 1
    err = capsys.readouterr().err
    assert "frame 95" in err and "is not the frame 95 stored" in err
    assert resume_point(store) == (96, False)
