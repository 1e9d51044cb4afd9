"""The command's start-up cost: building the parser imports no media, store, exporter,
viewer or Ray package, and a command imports only what it runs (a transcode: no store,
no exporter, no viewer, no Ray). Each check runs in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import av
import numpy as np

from hyperframes.cli import options
from hyperframes.metrics import prometheus

HEAVY = {
    "av", "cv2", "numpy", "zstandard", "lmdb", "prometheus_client", "starlette", "uvicorn",
    "ray", "wsgiref",
}  # fmt: skip
"""Packages the parser does without (wsgiref: the metrics exporter's HTTP server)."""


def imported_after(code: str) -> list[str]:
    """The packages of :data:`HEAVY` imported once ``code`` has run in a fresh interpreter."""
    probe = (
        f"{code}\nimport json, sys\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                          timeout=120, check=True)  # fmt: skip
    return sorted(HEAVY & set(json.loads(done.stdout.strip().splitlines()[-1])))


def test_building_the_parser_imports_no_heavy_package():
    assert imported_after("import hyperframes.cli as c; c.build_parser()") == []


def test_a_transcode_imports_no_store_exporter_viewer_or_ray(tmp_path: Path):
    clip = tmp_path / "in.mp4"
    with av.open(str(clip), "w") as container:
        stream = container.add_stream("libx264", rate=25, options={"preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for i in range(8):
            image = np.full((48, 64, 3), 30 * i, np.uint8)
            container.mux(stream.encode(av.VideoFrame.from_ndarray(image, format="rgb24")))
        container.mux(stream.encode(None))
    argv = ["transcode", str(clip), str(tmp_path / "out.mp4"), "--size", "32x24", "--json"]
    code = f"from hyperframes.cli import main\nassert main({argv!r}) == 0"
    found = set(imported_after(code))
    assert {"av", "numpy"} <= found  # what a transcode needs: the probe sees imports
    unneeded = {"lmdb", "prometheus_client", "starlette", "uvicorn", "ray", "wsgiref"}
    assert found & unneeded == set()


def test_the_metrics_host_default_is_the_exporters():
    assert options.DEFAULT_HOST == prometheus.DEFAULT_HOST
