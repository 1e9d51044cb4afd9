"""The viewer's routes without a browser: pages, frames, figures, and what is refused."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import av
import cv2
import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.testclient import TestClient

from hyperframes import FrameSpec, Pipeline
from hyperframes.hyper.distance import frame_mse
from hyperframes.io.video import VideoSource
from hyperframes.store import FrameStore, StoreSink, StoreWriter
from hyperframes.viewer import Viewer, create_app, open_viewed

pytestmark = pytest.mark.usefixtures("no_thread_leak")


@pytest.fixture
def frames(make_frames: Callable[..., np.ndarray]) -> np.ndarray:
    out = make_frames(60)
    out[30:] = 255 - out[30:]  # a cut at frame 30
    return out


@pytest.fixture
def store_path(tmp_path: Path, frames: np.ndarray) -> Path:
    path = tmp_path / "clip.hfs"
    pipeline = Pipeline.from_frames(frames, batch_size=8).group(threshold=0.02, max_len=8)
    pipeline.to(StoreSink(path)).run()  # the sink records the options the stage used
    return path


@pytest.fixture
def viewer(store_path: Path) -> Iterator[Viewer]:
    with Viewer(open_viewed(store_path), default_format="png") as v:
        yield v


@pytest.fixture
def client(viewer: Viewer) -> TestClient:
    return TestClient(viewer.app)


def decode(data: bytes) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def test_page_and_assets_are_served_with_strict_headers(client: TestClient) -> None:
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert '<script src="/static/viewer.js"' in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-content-type-options"] == "nosniff"
    script = client.get("/static/viewer.js")
    assert script.status_code == 200 and "javascript" in script.headers["content-type"]
    assert "hfViewer" in script.text
    style = client.get("/static/viewer.css")
    assert style.status_code == 200 and style.headers["content-type"].startswith("text/css")


@pytest.mark.parametrize(
    "path",
    [
        "/static/index.html",  # served at / only
        "/static/app.py",
        "/static/..%2fapp.py",
        "/static/%2e%2e/%2e%2e/__init__.py",
        "/static/viewer.js/extra",
        "/static/",
        "/etc/passwd",
        "/api",
        "/api/frame/abc",
        "/api/frame/-1",
        "/api/frame/60",
        "/api/frame/99999999999",
        "/api/frames/0",
        "/favicon.ico",
    ],
)
def test_paths_outside_the_served_assets_are_404(client: TestClient, path: str) -> None:
    assert client.get(path).status_code == 404


def test_writes_are_not_allowed(client: TestClient) -> None:
    assert client.post("/api/frame/0").status_code == 405
    assert client.put("/static/viewer.js", content=b"x").status_code == 405


def test_meta_describes_the_store(client: TestClient, viewer: Viewer) -> None:
    meta = client.get("/api/meta").json()
    assert meta["name"] == "clip.hfs" and meta["has_frames"] is True
    assert meta["frames"] == 60 and meta["shape"] == list(viewer.viewed.store.spec.shape)
    assert meta["format"] == "png" and meta["formats"] == ["jpeg", "png"]
    assert meta["hyperframes"] == len(viewer.viewed.store.groups)
    assert "/" not in meta["name"]  # never a full path


def test_png_frames_equal_the_store_frames(client: TestClient, viewer: Viewer) -> None:
    store = viewer.viewed.store
    for i in [0, 1, 29, 30, 59, 7, 3]:
        response = client.get(f"/api/frame/{i}?format=png")
        assert response.status_code == 200 and response.headers["content-type"] == "image/png"
        assert response.headers["x-frame-index"] == str(i)
        assert np.array_equal(decode(response.content), store[i]), f"frame {i}"


def test_jpeg_frames_are_close_to_the_store_frames(client: TestClient, viewer: Viewer) -> None:
    response = client.get("/api/frame/12?format=jpeg")
    assert response.headers["content-type"] == "image/jpeg"
    shown = decode(response.content)
    assert shown.shape == viewer.viewed.store.spec.shape
    assert frame_mse(shown, viewer.viewed.store[12]) < 0.01


def test_default_format_applies_and_unknown_formats_are_refused(client: TestClient) -> None:
    assert client.get("/api/frame/0").headers["content-type"] == "image/png"
    bad = client.get("/api/frame/0?format=bmp")
    assert bad.status_code == 400 and "jpeg" in bad.text


VFR_TICKS = [0, 1, 2, 5, 6, 9, 10, 11, 20, 21, 22, 30]
"""Presentation times of the VFR clip in 1/25 s: frame 3 is at 0.2 s, not at 3/25 = 0.12 s."""


@pytest.fixture
def vfr_store(tmp_path: Path, make_frames: Callable[..., np.ndarray]) -> Path:
    """A store packed from an ffv1 clip whose frames carry the times :data:`VFR_TICKS`."""
    frames = make_frames(len(VFR_TICKS))
    clip = tmp_path / "vfr.mkv"
    with av.open(str(clip), "w") as container:  # plain PyAV, independent of the code under test
        stream = container.add_stream("ffv1", rate=25)
        stream.width, stream.height, stream.pix_fmt = frames.shape[2], frames.shape[1], "bgr0"
        for frame, tick in zip(frames, VFR_TICKS, strict=True):
            video_frame = av.VideoFrame.from_ndarray(frame, format="rgb24")
            video_frame.pts = tick
            container.mux(stream.encode(video_frame))
        container.mux(stream.encode(None))
    path = tmp_path / "vfr.hfs"
    Pipeline.from_source(VideoSource(clip), batch_size=4).group().to(StoreSink(path)).run()
    return path


def test_timestamps_are_the_stored_presentation_times(vfr_store: Path) -> None:
    with Viewer(open_viewed(vfr_store), default_format="png") as viewer:
        client = TestClient(viewer.app)
        for i in (0, 3, 5, 8, 11):
            stamp = client.get(f"/api/frame/{i}").headers["x-timestamp"]
            assert stamp == f"{VFR_TICKS[i] / 25:.6f}", f"frame {i}"
        # the frames in between are real times too, not i / fps
        assert client.get("/api/frame/3").headers["x-timestamp"] != f"{3 / 25:.6f}"


def test_a_store_without_times_shows_index_over_fps(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    path = tmp_path / "untimed.hfs"
    with StoreWriter(path, FrameSpec((48, 64, 3)), {"fps": 25.0}, workers=1) as writer:
        writer.write_group(make_frames(6))  # no pts: the times are unknown
    with Viewer(open_viewed(path), default_format="png") as viewer:
        client = TestClient(viewer.app)
        assert [client.get(f"/api/frame/{i}").headers["x-timestamp"] for i in (0, 5)] == [
            "0.000000",
            "0.200000",
        ]


def test_timeline_has_the_boundaries_and_the_exact_mse(
    client: TestClient, viewer: Viewer, frames: np.ndarray
) -> None:
    assert viewer.timeline.join(timeout=30)
    timeline = client.get("/api/timeline").json()
    starts = viewer.viewed.store.groups.starts
    assert timeline["boundaries"] == [int(b) for b in starts[1:-1]]
    assert 30 in timeline["boundaries"]
    assert timeline["complete"] and timeline["computed"] == 60
    assert timeline["threshold"] == 0.02
    assert timeline["mse"][0] is None  # frame 0 has no predecessor
    for i in (1, 29, 30, 45):
        assert timeline["mse"][i] == pytest.approx(frame_mse(frames[i - 1], frames[i]))
    assert max(timeline["mse"][1:]) == timeline["mse"][30]


def test_stats_count_tiers_and_change_with_requests(client: TestClient) -> None:
    before = client.get("/api/stats").json()
    assert before["requests"] == 0 and before["recent"] == []
    first = client.get("/api/frame/20")
    again = client.get("/api/frame/20")
    assert first.headers["x-tier"] == "cold" and again.headers["x-tier"] == "hot"
    after = client.get("/api/stats").json()
    assert after["requests"] == 2 and after["recent"] == ["cold", "hot"]
    assert after["served"] == {"hot": 1, "warm": 0, "cold": 1}
    assert after["tiers"]["hot"]["hits"] >= 1 and after["tiers"]["cold"]["reads"] >= 1
    took = [float(r.headers["x-fetch-ms"]) for r in (first, again)]
    assert after["fetch_ms"]["last"] == pytest.approx(took[1], abs=1e-3)
    assert after["fetch_ms"]["mean"] == pytest.approx(sum(took) / 2, abs=2e-3)
    # more requests: the p95 is the nearest-rank one (the 19th smallest of 20)
    for i in [0, 59, 7, 30, 31, 8, 52, 3, 44, 19, 20, 21, 1, 58, 40, 41, 12, 13]:
        took.append(float(client.get(f"/api/frame/{i}").headers["x-fetch-ms"]))
    figures = client.get("/api/stats").json()["fetch_ms"]
    assert len(took) == 20 and figures["p95"] == pytest.approx(sorted(took)[18], abs=1e-3)


def test_read_ahead_follows_the_scrub_direction(client: TestClient, viewer: Viewer) -> None:
    groups = viewer.viewed.store.groups
    last = len(groups) - 1
    first, _ = groups.span(last)
    start, _ = groups.span(last - 1)
    assert client.get(f"/api/frame/{first + 1}").headers["x-tier"] == "cold"  # a jump
    # a local move: the whole group decodes, its header known from the jump's read
    assert client.get(f"/api/frame/{first}").headers["x-tier"] == "warm"
    assert client.get(f"/api/frame/{first + 1}").headers["x-tier"] == "hot"
    # the group before was read ahead while scrubbing backwards
    assert client.get(f"/api/frame/{first - 1}").headers["x-tier"] == "hot"
    assert client.get(f"/api/frame/{start}").headers["x-tier"] == "hot"


def test_a_foreign_host_header_is_refused_on_loopback(viewer: Viewer) -> None:
    app = create_app(frames=viewer.frames, allowed_hosts=["127.0.0.1", "localhost"])
    assert TestClient(app, base_url="http://127.0.0.1").get("/api/meta").status_code == 200
    assert TestClient(app, base_url="http://localhost:8765").get("/").status_code == 200
    assert TestClient(app, base_url="http://attacker.example").get("/").status_code == 400


def test_live_route_without_a_monitor(client: TestClient) -> None:
    assert client.get("/api/live").json() == {"state": "none"}


def test_a_live_only_page_serves_no_frames() -> None:
    client = TestClient(create_app(name="live run"))
    assert client.get("/api/meta").json()["has_frames"] is False
    for path in ("/api/frame/0", "/api/timeline", "/api/stats"):
        assert client.get(path).status_code == 404


def test_a_video_is_packed_with_its_mse_and_served_exactly(synthetic_mp4: Path) -> None:
    with Viewer(open_viewed(synthetic_mp4), default_format="png") as viewer:
        folder = viewer.viewed.store.path.parent
        client = TestClient(viewer.app)
        timeline = client.get("/api/timeline").json()
        assert timeline["complete"] and timeline["frames"] == 40  # known from the pack
        assert client.get("/api/meta").json()["name"] == "synthetic.mp4"
        decoded = np.zeros((40, 48, 64, 3), np.uint8)
        source = Pipeline.from_source(VideoSource(synthetic_mp4), batch_size=8)
        source.for_each(lambda i, frame: decoded.__setitem__(i, frame)).run()
        for i in (0, 17, 39):
            shown = decode(client.get(f"/api/frame/{i}?format=png").content)
            assert np.array_equal(shown, decoded[i])
        assert timeline["mse"][5] == pytest.approx(frame_mse(decoded[4], decoded[5]))
    assert not folder.exists()  # the temporary store is removed


def test_a_missing_path_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        open_viewed(tmp_path / "nothing.mp4")


def test_an_x264_store_is_served_exactly(synthetic_mp4: Path, tmp_path: Path) -> None:
    """The size mode's store (lossless H.264 GOPs): random frames, as the store gives them."""
    path = tmp_path / "x264.hfs"
    source = VideoSource(synthetic_mp4, pix_fmt="native")
    Pipeline.from_source(source, batch_size=8).group(threshold=1.0, max_len=8).to(
        StoreSink(path, intra="x264", gop=4)
    ).run()
    with Viewer(open_viewed(path), default_format="png") as viewer, FrameStore(path) as store:
        client = TestClient(viewer.app)
        for i in (37, 3, 20, 0):  # each from its nearest keyframe
            shown = decode(client.get(f"/api/frame/{i}?format=png").content)
            assert np.array_equal(shown, store[i])
