"""Colour tags that change mid-stream (two MPEG-TS files joined: BT.601, then BT.709)."""

from __future__ import annotations

import av
import numpy as np
import pytest

import hyperframes as hf
from hyperframes.cli import main
from hyperframes.errors import MediaError

COLOUR = np.tile(np.array([200, 40, 90], np.uint8), (48, 64, 1))  # saturated: tags matter


def segment(path, colorspace):
    with av.open(str(path), "w", format="mpegts") as container:
        stream = container.add_stream("libx264", rate=25)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        stream.codec_context.colorspace = colorspace
        for i in range(10):
            frame = av.VideoFrame.from_ndarray(COLOUR, format="rgb24")
            frame.pts, frame.colorspace = i, colorspace
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    return path.read_bytes()


@pytest.fixture
def joined(tmp_path):
    path = tmp_path / "joined.ts"
    path.write_bytes(segment(tmp_path / "a.ts", 5) + segment(tmp_path / "b.ts", 1))
    with av.open(str(path)) as container:
        tags = [f.colorspace for f in container.decode(video=0)]
    assert tags[0] != tags[-1]  # the clip does change its tags
    return path


def test_rgb_converts_each_frame_with_its_own_tags(joined):
    got = hf.Pipeline.from_source(hf.VideoSource(joined)).collect()
    with av.open(str(joined)) as container:
        want = np.stack([f.to_ndarray(format="rgb24") for f in container.decode(video=0)])
    assert np.abs(got.astype(int) - want.astype(int)).max() <= 1


def test_planes_refuse_the_change_with_one_line(joined, tmp_path, capsys):
    with pytest.raises(MediaError, match=r"frame 10 .* changes its colour tags"):
        hf.Pipeline.from_source(hf.VideoSource(joined, pix_fmt="native")).collect()
    assert main(["pack", str(joined), str(tmp_path / "s.hfs")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "colour tags" in err[0] and "rgb24" in err[0]
    assert main(["pack", str(joined), str(tmp_path / "r.hfs"), "--pix-fmt", "rgb24"]) == 0
