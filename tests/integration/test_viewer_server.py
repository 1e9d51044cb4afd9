"""Serving the viewer for real: loopback binding, the background server, the live monitor."""

from __future__ import annotations

import argparse
import json
import socket
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from hyperframes import Pipeline
from hyperframes.cli import view as view_cli
from hyperframes.engine.watch import (
    RunSnapshot,
    StageQuality,
    StageSnapshot,
)
from hyperframes.io.base import CacheTier, SourceFigures
from hyperframes.store import StoreSink
from hyperframes.viewer import (
    BackgroundServer,
    LiveMonitor,
    Viewer,
    bind,
    check_bind,
    is_loopback,
    open_viewed,
    start_live_view,
)
from hyperframes.viewer.live import rates, shown_figures, stage_frames
from hyperframes.viewer.server import allowed_hosts

pytestmark = pytest.mark.usefixtures("no_thread_leak")


def get_json(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


@pytest.mark.parametrize(
    ("host", "loopback"),
    [("127.0.0.1", True), ("127.0.0.2", True), ("localhost", True), ("::1", True),
     ("[::1]", True), ("0.0.0.0", False), ("192.168.1.5", False), ("::", False),
     ("example.com", False)],
)  # fmt: skip
def test_loopback_detection(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_non_loopback_binds_are_refused_unless_explicit() -> None:
    with pytest.raises(ValueError, match="not a loopback address"):
        check_bind("0.0.0.0", allow_remote=False)
    check_bind("0.0.0.0", allow_remote=True)  # --host given
    check_bind("127.0.0.1", allow_remote=False)
    sock = bind(None, 0)
    try:
        assert sock.getsockname()[0] == "127.0.0.1"
    finally:
        sock.close()
    assert allowed_hosts("127.0.0.1") == ["127.0.0.1", "localhost"]
    assert allowed_hosts("0.0.0.0") is None


def test_the_cli_serves_loopback_unless_host_is_given(
    tmp_path: Path, make_frames: Callable[..., np.ndarray], monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = argparse.ArgumentParser()
    view_cli.register(parser.add_subparsers())
    args = parser.parse_args(["view", "x.hfs"])
    assert args.host is None and args.port == view_cli.DEFAULT_PORT and args.format == "jpeg"
    assert parser.parse_args(["view", "x", "--host", "0.0.0.0"]).host == "0.0.0.0"
    with pytest.raises(SystemExit):
        parser.parse_args(["view", "x", "--port", "70000"])

    path = tmp_path / "s.hfs"
    Pipeline.from_frames(make_frames(12), batch_size=4).group().to(StoreSink(path)).run()
    served: dict[str, Any] = {}

    def fake_serve(app: Any, sock: socket.socket) -> None:
        served["address"] = sock.getsockname()[0]

    monkeypatch.setattr("hyperframes.viewer.server.serve_forever", fake_serve)
    args = parser.parse_args(["view", str(path), "--port", "0", "--format", "png"])
    assert args.run(args) == 0
    assert served["address"] == "127.0.0.1"


def test_a_background_server_serves_the_viewer(
    tmp_path: Path, make_frames: Callable[..., np.ndarray]
) -> None:
    path = tmp_path / "s.hfs"
    Pipeline.from_frames(make_frames(16), batch_size=8).group().to(StoreSink(path)).run()
    with Viewer(open_viewed(path), allowed_hosts=allowed_hosts("127.0.0.1")) as viewer:
        server = BackgroundServer(viewer.app, port=0)
        server.start()
        try:
            assert server.url.startswith("http://127.0.0.1:")
            assert get_json(server.url + "api/meta")["frames"] == 16
            with urllib.request.urlopen(server.url + "api/frame/3", timeout=10) as response:
                assert response.headers["x-frame-index"] == "3"
            with pytest.raises(urllib.error.HTTPError) as err:
                urllib.request.urlopen(server.url + "static/../../etc/passwd", timeout=10)
            assert err.value.code == 404
            err.value.close()
        finally:
            server.close()


def test_rates_are_frames_per_second_over_the_window() -> None:
    snap = RunSnapshot(
        elapsed_s=2.0,
        frames=8,
        total=None,
        batch_size=4,
        stages=(StageSnapshot("decode", 1, 16, 4, 1.0, 0.0, 0.0),),
    )
    assert stage_frames(snap) == {"decode": 16, "(delivered)": 8}
    history = [(0.0, {"decode": 0, "(delivered)": 0}), (2.0, {"decode": 16, "(delivered)": 8})]
    assert rates(history) == {"decode": 8.0, "(delivered)": 4.0}
    assert rates(history[:1]) == {} and rates([history[0], history[0]]) == {}


def test_the_live_monitor_follows_a_run() -> None:
    monitor = LiveMonitor()
    assert monitor.view()["state"] == "idle"
    seen: list[dict[str, Any]] = []

    def watch(frames: np.ndarray) -> np.ndarray:
        seen.append(monitor.view())  # the page polling during the run
        return frames

    frames = np.zeros((32, 8, 8, 3), np.uint8)
    pipeline = Pipeline.from_frames(frames, batch_size=8).map(watch, name="watch")
    pipeline.for_each(lambda i, frame: None).run(monitor=monitor)
    assert seen and all(v["state"] == "running" for v in seen)
    run = seen[-1]["run"]
    names = [s["name"] for s in run["stages"]]
    assert "watch" in names
    assert all("fps" in s and "busy_share" in s for s in run["stages"])
    assert run["pools"] and "in_use" in run["pools"][0]
    final = monitor.view()
    assert final["state"] == "finished" and final["report"]["frames"] == 32
    assert final["runs"] == 1 and "run" not in final


def test_the_page_shows_a_stages_psnr_and_the_sources_cache_tiers_as_strict_json() -> None:
    """An exact PSNR is infinite: the page's JSON must still parse (no Infinity)."""
    exact = StageQuality.of_mse(0.0, samples=4, window=64)
    lossy = StageQuality.of_mse(1e-4, samples=4, window=64)
    snap = RunSnapshot(
        elapsed_s=1.0,
        frames=8,
        total=16,
        batch_size=4,
        stages=(
            StageSnapshot("source", 1, 8, 2, 0.1, 0.0, 0.0),
            StageSnapshot("reuse", 1, 8, 2, 0.2, 0.0, 0.0, queue_capacity=3, quality=exact),
            StageSnapshot("lossy", 1, 8, 2, 0.2, 0.0, 0.0, queue_capacity=3, quality=lossy),
        ),
        extra={"reuse": {"computed": 2, "reused": 6}},
        source_figures=SourceFigures(cache=(CacheTier("warm", hits=3, misses=1, bytes=99),)),
    )
    shown = shown_figures(snap)
    assert shown["reuse"] == {"computed": 2, "reused": 6, "psnr_db_recent": "exact"}
    assert shown["lossy"] == {"psnr_db_recent": 40.0}
    assert shown["source"] == {"warm_hits": 3, "warm_misses": 1, "warm_bytes": 99}
    monitor = LiveMonitor()
    monitor.start(lambda: snap)
    view = json.loads(json.dumps(monitor.view(), allow_nan=False))
    stages = {s["name"]: s for s in view["run"]["stages"]}
    assert stages["reuse"]["quality"]["psnr_db"] is None  # exact
    assert stages["lossy"]["quality"]["psnr_db"] == pytest.approx(40.0)
    assert stages["lossy"]["busy_share"] == 0.2
    assert view["run"]["source_figures"]["cache"][0]["hits"] == 3
    assert view["run"]["extra"] == json.loads(json.dumps(shown))
    monitor.stop(None)


def test_start_live_view_serves_the_monitor() -> None:
    monitor = start_live_view(0)
    try:
        assert monitor.url is not None and monitor.url.startswith("http://127.0.0.1:")
        assert get_json(monitor.url + "api/live")["state"] == "idle"
        assert get_json(monitor.url + "api/meta")["live"] is True
        frames = np.zeros((16, 4, 4, 3), np.uint8)
        pipeline = Pipeline.from_frames(frames, batch_size=4).map(lambda f: f)
        pipeline.for_each(lambda i, frame: None).run(monitor=monitor)
        assert get_json(monitor.url + "api/live")["state"] == "finished"
    finally:
        monitor.close()
    monitor.close()  # twice is fine
