"""Nothing in the file is lost (issue 48): a film's sound, subtitles, title and chapters go
through ``transcode`` (every container, every way of cutting time, ``--chunks`` on a
two-node Ray cluster, a resumed run) and ``render --audio``, in step with the frames
kept; what a container cannot hold is named in a warning and in the report, and what
the user leaves out (``--audio none``) goes silently."""

from __future__ import annotations

import json
import struct
from fractions import Fraction
from pathlib import Path

import av
import numpy as np
import pytest
from films import CUES, FRAMES, RATE, TRACKS, write_film, write_long_film

from hyperframes.chunked import run_chunked
from hyperframes.cli import main
from hyperframes.io.carry import Carry, plan

CODECS = {".mp4": "libx264", ".mov": "libx264", ".mkv": "libx264", ".webm": "libvpx-vp9"}


@pytest.fixture(scope="module")
def film(tmp_path_factory) -> Path:
    return write_film(tmp_path_factory.mktemp("film") / "film.mp4")


# -- what a check reads back ---------------------------------------------------------------


def packets_of(path: Path, kind: str, k: int = 0) -> list[av.Packet]:
    with av.open(str(path)) as container:
        stream = getattr(container.streams, kind)[k]
        return [p for p in container.demux(stream) if p.pts is not None and p.size]


def samples(path: Path, k: int = 0, start: float = 0.0, stop: float = 1e9) -> np.ndarray:
    """Track ``k``'s decoded sound, of the packets that start in ``[start, stop)`` seconds."""
    with av.open(str(path)) as container:
        stream = container.streams.audio[k]
        blocks = [
            frame.to_ndarray()
            for packet in container.demux(stream)
            if packet.pts is not None
            and start - 1e-6 <= float(packet.pts * packet.time_base) < stop
            for frame in packet.decode()
        ]
    return np.concatenate(blocks, axis=1)


def decoded(path: Path, k: int) -> tuple[np.ndarray, int, float]:
    """Track ``k`` decoded whole as float samples (channels, n), its rate and start time."""
    with av.open(str(path)) as container:
        frames = list(container.decode(container.streams.audio[k]))
    rate, first = frames[0].sample_rate, frames[0]
    start = float(first.pts * first.time_base)
    blocks = []
    for f in frames:
        data = f.to_ndarray()
        blocks.append(data if f.format.is_planar else data.reshape(-1, 2).T)
    data = np.concatenate(blocks, axis=1)
    scale = {np.dtype("int16"): 2.0**15, np.dtype("int32"): 2.0**31}.get(data.dtype, 1.0)
    return data.astype(np.float64) / scale, rate, start


def aligned(film: Path, out: Path, k: int, offset: float) -> tuple[np.ndarray, np.ndarray]:
    """Track ``k`` of the input and of the output over the span both hold (the output's
    time ``t`` is the input's ``t + offset``), a tenth of a second in from each end: a
    stream copied from a cut starts at a packet, decoded without the one before it."""
    a, rate, sa = decoded(film, k)
    b, rate_b, sb = decoded(out, k)
    assert rate == rate_b
    lo = max(sa, sb + offset) + 0.1
    hi = min(sa + a.shape[1] / rate, sb + offset + b.shape[1] / rate) - 0.1
    n, ia, ib = int((hi - lo) * rate), round((lo - sa) * rate), round((lo - offset - sb) * rate)
    return a[:, ia : ia + n], b[:, ib : ib + n]


def snr_db(film: Path, out: Path, k: int, offset: float) -> float:
    x, y = aligned(film, out, k, offset)
    return float(10 * np.log10((x**2).sum() / max(1e-30, ((x - y) ** 2).sum())))


def span(path: Path, kind: str, k: int = 0) -> tuple[float, float]:
    """The first and last time a stream is played, from its packets (a packet before zero
    only primes the decoder: an encoder's delay, or the packet before a cut)."""
    packets = packets_of(path, kind, k)
    first = min(float(p.pts * p.time_base) for p in packets)
    return max(0.0, first), max(float((p.pts + p.duration) * p.time_base) for p in packets)


def cues(path: Path) -> list[tuple[float, str]]:
    """Each subtitle cue's start and text (any text codec)."""
    found = []
    for p in packets_of(path, "subtitles"):
        data = bytes(p)
        text = data[2:].decode() if data[:2] == struct.pack(">H", len(data) - 2) else data.decode()
        if text:
            found.append((round(float(p.pts * p.time_base), 3), text))
    return found


def check_carried(film: Path, out: Path, start: float, stop: float, same: bool = True) -> None:
    """``out`` holds the film's two sound tracks over ``[start, stop)`` seconds of it (the
    same packets where copied, unless ``same`` is false; 40 dB or better where
    re-encoded), as long as its video within a frame, its subtitles in range, its title
    and its chapters."""
    with av.open(str(out)) as container:
        assert container.metadata.get("title") == "A Film"
        languages = [s.metadata.get("language") for s in container.streams.audio]
        codecs = [s.codec_context.name for s in container.streams.audio]
        assert languages == ["eng", "fra"]
        assert container.chapters(), "the chapters are lost"
    video = span(out, "video")
    for k, codec in enumerate(codecs):
        sound = span(out, "audio", k)
        assert abs((sound[1] - sound[0]) - (video[1] - video[0])) <= 1 / RATE, (k, sound, video)
        if codec == "aac" and same:  # copied: the very packets of the range
            np.testing.assert_array_equal(samples(out, k), samples(film, k, start, stop))
        elif TRACKS[k][1] == 48000:  # (re-encoded to Opus, the 44.1 kHz track is resampled)
            assert snr_db(film, out, k, start) >= 40
    wanted = [(round(a - start, 3), t) for a, b, t in CUES if b > start and a < stop]
    assert [t for _, t in cues(out)] == [t for _, t in wanted]


# -- the containers and every way of cutting time ----------------------------------------


CUTS = {
    "whole": ([], 0.0, 4.0),
    "size": (["--size", "32x24"], 0.0, 4.0),
    "frames": (["--start", "10", "--stop", "70"], 0.4, 2.8),
    "seconds": (["--start", "0.4s", "--stop", "00:00:02.800"], 0.4, 2.8),
    "every": (["--every", "2"], 0.0, 4.0),
    "map": (["--map", "invert:invert"], 0.0, 4.0),
}


@pytest.fixture
def invert(tmp_path, monkeypatch):
    (tmp_path / "invert.py").write_text("def invert(frames):\n    return 255 - frames\n")
    monkeypatch.syspath_prepend(str(tmp_path))


@pytest.mark.parametrize("cut", list(CUTS))
@pytest.mark.parametrize("suffix", list(CODECS))
def test_a_transcode_carries_every_stream_in_step(film, tmp_path, suffix, cut, invert, capsys):
    flags, start, stop = CUTS[cut]
    out = tmp_path / f"out{suffix}"
    argv = ["transcode", str(film), str(out), "--codec", CODECS[suffix], *flags, "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["warnings"] == [], report["warnings"]  # everything went somewhere
    streams = report["extra"]["streams"]
    carried = [
        s["index"] for kind in ("copied", "encoded", "converted") for s in streams.get(kind, [])
    ]
    assert sorted(carried) == [1, 2, 3] and "dropped" not in streams
    check_carried(film, out, start, stop)
    if suffix == ".webm":  # the container takes Opus and WebVTT only: re-encoded, converted
        assert {s["to"] for s in streams["encoded"]} == {"opus"}
        assert streams["converted"][0]["to"] == "webvtt"


@pytest.mark.parametrize("suffix", [".mkv", ".mp4"])
def test_a_chosen_sound_codec_is_used(film, tmp_path, suffix, capsys):
    out = tmp_path / f"flac{suffix}"
    assert main(["transcode", str(film), str(out), "--audio-codec", "flac", "--start", "10",
                 "--stop", "70", "--json"]) == 0  # fmt: skip
    streams = json.loads(capsys.readouterr().out)["extra"]["streams"]
    assert [s["to"] for s in streams["encoded"]] == ["flac", "flac"]
    for k in (0, 1):  # lossless from the decoded AAC, cut to the sample at 0.4 s
        assert snr_db(film, out, k, 0.4) >= 80
    check_carried(film, out, 0.4, 2.8)


def test_a_sound_codec_the_container_cannot_hold_is_refused(film, tmp_path, capsys):
    out = tmp_path / "out.webm"
    code = main(["transcode", str(film), str(out), "--codec", "libvpx-vp9", "--audio-codec", "aac"])
    err = capsys.readouterr().err
    assert code == 2 and "a .webm file cannot hold aac sound; pick one of" in err
    assert "opus" in err and not out.exists()


def test_leaving_the_sound_out_is_silent(film, tmp_path, capsys):
    out = tmp_path / "quiet.mp4"
    argv = ["transcode", str(film), str(out), "--audio", "none", "--subtitles", "none", "--json"]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["warnings"] == [] and "dropped" not in report["extra"].get("streams", {})
    with av.open(str(out)) as container:
        assert not container.streams.audio and not container.streams.subtitles
        assert container.metadata.get("title") == "A Film"


def test_a_stream_the_output_cannot_hold_is_named(tmp_path, capsys):
    film = write_film(tmp_path / "film.mkv", attachment=True)
    out = tmp_path / "out.mp4"
    assert main(["transcode", str(film), str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    (warning,) = [w for w in report["warnings"] if "not in the output" in w]
    assert "attachment font.ttf (stream 4: a .mp4 file holds no attachments; write .mkv" in warning
    assert [d["index"] for d in report["extra"]["streams"]["dropped"]] == [4]
    # the rest went, SubRip became mov_text (the AAC of a Matroska file starts with a
    # packet before zero, its encoder's delay, which no frame is shown with)
    check_carried(film, out, 0.0, 4.0, same=False)
    kept = tmp_path / "kept.mkv"
    assert main(["transcode", str(film), str(kept), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["warnings"] == [] and report["extra"]["streams"]["attached"][0]["index"] == 4
    with av.open(str(kept)) as container:
        (font,) = container.streams.attachments
        assert bytes(font.data) == b"a font's bytes" and font.name == "font.ttf"


def test_a_looped_input_names_what_it_does_not_carry(film, tmp_path, capsys):
    assert main(["transcode", str(film), str(tmp_path / "looped.mp4"), "--loop", "2"]) == 0
    out = " ".join(capsys.readouterr().out.split())  # (the report wraps its lines)
    assert "not in the output: audio aac (eng) (stream 1: the input is played 2 times" in out
    assert "2 chapters" in out


def test_a_video_alone_gets_no_warning(film, tmp_path, capsys):
    alone = tmp_path / "alone.mp4"
    assert main(["transcode", str(film), str(alone), "--audio", "none", "--subtitles", "none"]) == 0
    capsys.readouterr()
    assert main(["transcode", str(alone), str(tmp_path / "again.mp4"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["warnings"] == [] and "dropped" not in report["extra"].get("streams", {})


def test_info_lists_every_stream(film, capsys):
    assert main(["info", str(film), "--json"]) == 0
    facts = json.loads(capsys.readouterr().out)
    english, french, subs, chapters = facts["streams"]
    assert (english["type"], english["codec"], english["channels"]) == ("audio", "aac", 2)
    assert (english["language"], english["rate"], french["rate"]) == ("eng", 48000, 44100)
    assert abs(english["duration"] - 4.0) < 0.05 and subs["codec"] == "mov_text"
    assert chapters["type"] == "data" and facts["chapters"] == 2
    assert main(["info", str(film)]) == 0
    lines = capsys.readouterr().out.splitlines()
    first = next(k for k, line in enumerate(lines) if line.startswith("streams"))
    assert lines[first].endswith("#1 audio aac (eng), 48000 Hz, 2 channels, 4.01 s")
    assert lines[first + 2].strip() == "#3 subtitle mov_text (eng), 3.5 s"


# -- segments, resumed runs, renders ----------------------------------------------------


def test_a_resumed_chunked_run_carries_the_sound_whole(film, tmp_path):
    """Segments are joined by stream copy and the sound muxed beside them in one piece:
    no seam, and a rerun that remakes one segment gives the same file."""
    out = tmp_path / "chunks.mkv"
    options = {"executor": "threads", "segments": 3, "carry": Carry(), "start": 10, "stop": 90}
    report = run_chunked(film, out, keep_segments=True, **options)
    assert report.extra["chunks"]["segments"] == 3 and report.extra["streams"]["chapters"] == 2
    check_carried(film, out, 0.4, 3.6)
    first = samples(out)
    out.unlink()
    folder = tmp_path / ".chunks.mkv.segments"
    for part in folder.glob("segment-00001.*"):
        part.unlink()
    report = run_chunked(film, out, **options)
    assert report.extra["chunks"]["reused"] == 2
    np.testing.assert_array_equal(samples(out), first)
    check_carried(film, out, 0.4, 3.6)


def test_a_matroska_h264_output_joins(film, tmp_path):
    """Matroska stores no decode times: the join orders them itself (it failed with
    'Invalid argument' before)."""
    out = tmp_path / "x264.mkv"
    run_chunked(film, out, executor="threads", segments=2, codec="libx264")
    with av.open(str(out)) as container:
        assert container.streams.video[0].frames in (0, FRAMES)
        assert sum(1 for _ in container.decode(video=0)) == FRAMES


@pytest.mark.parametrize("suffix", list(CODECS))
def test_chunks_on_ray_carry_every_stream(ray_cluster, film, tmp_path, suffix, capsys):
    out = tmp_path / f"chunks{suffix}"
    argv = ["transcode", str(film), str(out), "--codec", CODECS[suffix], "--chunks", "2",
            "--start", "10", "--stop", "90", "--json"]  # fmt: skip
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["warnings"] == [] and report["extra"]["chunks"]["segments"] == 2
    check_carried(film, out, 0.4, 3.6)


def test_a_render_takes_a_soundtrack(tmp_path, monkeypatch, capsys):
    (tmp_path / "scored_scene.py").write_text(
        "import numpy as np\n\ndef frame(i):\n    return np.full((48, 64, 3), i, np.uint8)\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    music = write_film(tmp_path / "music.mp4")  # (its video, subtitles and title stay out)
    for suffix, extra in (
        (".mp4", []),
        (".webm", ["--codec", "libvpx-vp9"]),
        (".mkv", ["--resume"]),
    ):
        out = tmp_path / f"render{suffix}"
        argv = ["render", "scored_scene:frame", str(out), "--frames", "50", "--size", "64x48",
                "--fps", "25", "--audio", str(music), *extra, "--json"]  # fmt: skip
        assert main(argv) == 0
        report = json.loads(capsys.readouterr().out)
        assert report["warnings"] == []
        with av.open(str(out)) as container:
            assert len(container.streams.audio) == 2 and not container.streams.subtitles
            assert "title" not in container.metadata
        video, sound = span(out, "video"), span(out, "audio")
        assert abs((sound[1] - sound[0]) - 2.0) <= 1 / RATE and abs(video[1] - 2.0) < 1e-6
    code = main(["render", "scored_scene:frame", str(tmp_path / "x.mp4"), "--frames", "5", "--size",
                 "64x48", "--audio", str(tmp_path / "scored_scene.py")])  # fmt: skip
    assert code == 1 and "cannot open" in capsys.readouterr().err


def test_the_plan_is_a_pure_choice():
    streams = [
        {"index": 1, "type": "audio", "codec": "dts"},
        {"index": 2, "type": "subtitle", "codec": "hdmv_pgs_subtitle"},
        {"index": 3, "type": "subtitle", "codec": "ass"},
        {"index": 4, "type": "data", "codec": "unknown", "discarded": True},
    ]
    mp4 = {"aac", "mov_text", "opus"}
    routes = plan(streams, ".mp4", mp4, Carry(), has_chapters=True)
    assert [(r.action, r.to) for r in routes] == [
        ("encode", "aac"),
        ("drop", None),
        ("convert", "mov_text"),
        ("omit", None),
    ]
    assert "write .mkv to keep them" in routes[1].why
    quiet = plan(streams, ".mp4", mp4, Carry(audio="none", subtitles="none"))
    assert [r.action for r in quiet[:3]] == ["omit"] * 3
    with pytest.raises(ValueError, match="audio_codec must be one of"):
        Carry(audio_codec="wav")
    with pytest.raises(ValueError, match=r"a \.webm file cannot hold flac sound"):
        Carry(audio_codec="flac").check("film.webm")


def test_a_store_says_what_it_cannot_give_back(film, tmp_path, capsys):
    assert main(["pack", str(film), str(tmp_path / "film.hfs")]) == 0
    err = capsys.readouterr().err
    assert "a store keeps the frames only, so unpack cannot give back audio aac (eng)" in err
    assert "subtitle mov_text (eng), 2 chapters" in err
    assert main(["unpack", str(tmp_path / "film.hfs"), str(tmp_path / "back.mkv"), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["not_given_back"].startswith("audio aac (eng), audio aac (fra)")
    assert "warning: the store holds the frames only: audio aac (eng)" in err


def test_results_keep_the_source_time_base(film, tmp_path, monkeypatch, capsys):
    import pyarrow.parquet as pq

    (tmp_path / "bright.py").write_text("def bright(frames):\n    return frames.mean((1, 2, 3))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    out = tmp_path / "rows.parquet"
    assert main(["map", str(film), "bright:bright", "--out", str(out), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["extra"]["sink"]["time_base"] == "1/12800"
    table = pq.read_table(out)
    base = Fraction(table.schema.metadata[b"hyperframes.time_base"].decode())
    ticks = [t / base for t in table.column("time").to_pylist()]
    assert max(abs(t - round(t)) for t in ticks) < 1e-6 and round(ticks[25]) == 12800  # 1 s


def sound_offsets(film: Path, out: Path, origin: float) -> list[float]:
    """How far the output's first and last sound packets sit from where the input had
    them (less ``origin``, where the video starts), in seconds: the same packets, matched
    by count from the first one kept and checked by their bytes."""

    def timed(path: Path) -> list[tuple[float, bytes]]:
        return [(float(p.pts * p.time_base), bytes(p)) for p in packets_of(path, "audio")]

    source = timed(film)
    kept = [(t, data) for t, data in timed(out) if t >= 0]  # (not a packet that only primes)
    first = next(k for k, (t, _) in enumerate(source) if t >= origin - 1e-6)
    assert source[first][1] == kept[0][1] and source[first + len(kept) - 1][1] == kept[-1][1]
    return [kept[k][0] - (source[first + k][0] - origin) for k in (0, len(kept) - 1)]


@pytest.mark.slow
def test_two_hours_stay_in_step(tmp_path, capsys):
    """At the end of a two-hour input the sound is where it was against the picture: no
    drift, under a cut in seconds and under segments joined (about 3 minutes)."""
    film = write_long_film(tmp_path / "two_hours.mp4", 2 * 60 * 60)
    out = tmp_path / "cut.mp4"
    argv = ["transcode", str(film), str(out), "--start", "1:00", "--stop", "1:59:00",
            "--preset", "ultrafast"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    assert span(out, "video")[1] == pytest.approx(118 * 60, abs=1e-6)
    assert max(map(abs, sound_offsets(film, out, 60.0))) <= 1 / RATE
    joined = tmp_path / "joined.mkv"
    run_chunked(film, joined, executor="threads", segments=6, carry=Carry(), preset="ultrafast")
    assert max(map(abs, sound_offsets(film, joined, 0.0))) <= 1 / RATE


@pytest.mark.parametrize("suffix", [".mp4", ".mov"])
def test_a_copied_sound_keeps_its_priming_packet(film, tmp_path, suffix):
    """AAC decodes each packet with the one before: the packet before the first frame goes
    along before zero, skipped by players (an edit list), as the encoder's own delay was,
    so the output holds the input's very packets, as ``ffmpeg -c:a copy`` gives them."""
    whole, cut = tmp_path / f"whole{suffix}", tmp_path / f"cut{suffix}"
    assert main(["transcode", str(film), str(whole)]) == 0
    assert main(["transcode", str(film), str(cut), "--start", "10"]) == 0
    source = [bytes(p) for p in packets_of(film, "audio")]
    kept = [(float(p.pts * p.time_base), bytes(p)) for p in packets_of(cut, "audio")]
    assert [bytes(p) for p in packets_of(whole, "audio")] == source
    assert kept[0][0] < 0 <= kept[1][0]  # the packet before the cut primes the decoder
    first = source.index(kept[1][1])
    assert [data for _, data in kept] == source[first - 1 : first - 1 + len(kept)]


def test_a_stream_that_cannot_be_read_fails_in_one_line_and_leaves_nothing(
    film, tmp_path, monkeypatch, capsys
):
    from hyperframes.io import tracks

    def damaged(self, packet, output, origin):  # type: ignore[no-untyped-def]
        raise av.InvalidDataError(1094995529, "Invalid data found when processing input")

    monkeypatch.setattr(tracks._Copy, "feed", damaged)
    out = tmp_path / "out.mp4"
    assert main(["transcode", str(film), str(out)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the input's sound or subtitles cannot be carried near" in err[0]
    assert "pass --audio none and --subtitles none" in err[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_copied_subtitles_keep_their_codec_parameters(film, tmp_path):
    """A copied stream goes with its codec's parameters (a mov_text track's description),
    not only its packets."""
    out = tmp_path / "out.mov"
    assert main(["transcode", str(film), str(out)]) == 0
    with av.open(str(film)) as a, av.open(str(out)) as b:
        given = a.streams.subtitles[0].codec_context.extradata
        assert given and b.streams.subtitles[0].codec_context.extradata == given
