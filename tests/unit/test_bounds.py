"""Bounds that protect the machine: --workers, and the metrics endpoint's connections."""

from __future__ import annotations

import socket
import threading
import time
import urllib.request

import pytest

from hyperframes.cli import main
from hyperframes.engine.watch import RunSnapshot
from hyperframes.metrics import _server
from hyperframes.metrics.prometheus import PrometheusExporter


def test_workers_above_four_per_cpu_are_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        main(["transcode", "in.mp4", "out.mkv", "--workers", "1000"])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--workers" in err and "4 x the" in err


def test_idle_connections_neither_pile_up_threads_nor_stay(monkeypatch):
    monkeypatch.setattr(_server.QuietHandler, "timeout", 0.5)
    exporter = PrometheusExporter(port=0)
    exporter.start(lambda: RunSnapshot(elapsed_s=0.0, frames=0, total=1, batch_size=1))
    before = threading.active_count()
    idle = [socket.create_connection(("127.0.0.1", exporter.port)) for _ in range(60)]
    try:
        time.sleep(0.2)
        assert threading.active_count() - before <= _server.CONNECTIONS
        deadline = time.monotonic() + 10
        while threading.active_count() > before and time.monotonic() < deadline:
            time.sleep(0.1)
        assert threading.active_count() <= before  # idle ones timed out
        text = urllib.request.urlopen(exporter.url, timeout=5).read().decode()
        assert "hyperframes_frames_expected" in text
    finally:
        for s in idle:
            s.close()
        exporter.stop(None)
