"""Hostile requests and damaged stores: the viewer answers each with a clean status.

Every test client here re-raises what the app lets escape (``TestClient``'s default), so
a request that used to end in a 500 with a traceback fails the test outright.
"""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import lmdb
import numpy as np
import pytest

pytest.importorskip("starlette")
pytest.importorskip("uvicorn")

from starlette.testclient import TestClient

from hyperframes import Pipeline
from hyperframes.store import FrameStore, StoreSink
from hyperframes.store import format as store_format
from hyperframes.viewer import Viewer, create_app, open_viewed
from hyperframes.viewer.app import MAX_INDEX, parse_index
from hyperframes.viewer.frames import FrameServer
from hyperframes.viewer.server import allowed_hosts

pytestmark = pytest.mark.usefixtures("no_thread_leak")

FRAMES = 24


@pytest.fixture
def store_path(tmp_path: Path, make_frames: Callable[..., np.ndarray]) -> Path:
    path = tmp_path / "clip.hfs"
    pipeline = Pipeline.from_frames(make_frames(FRAMES), batch_size=8).group(max_len=8)
    pipeline.to(StoreSink(path)).run()
    return path


def damage_record(path: Path, group: int) -> tuple[int, int]:
    """Flip bytes in the middle of ``group``'s record through LMDB; its frames ``[a, b)``."""
    with FrameStore(path) as store:
        span = store.groups.span(group)
    env = lmdb.open(str(path), max_dbs=2)
    try:
        with env.begin(write=True) as txn:
            db = env.open_db(store_format.RECORDS_DB, txn=txn, create=False)
            key = store_format.group_key(group)
            record = bytearray(txn.get(key, db=db))
            middle = len(record) // 2
            record[middle : middle + 4] = bytes(b ^ 0xFF for b in record[middle : middle + 4])
            txn.put(key, bytes(record), db=db)
    finally:
        env.close()
    return span


@pytest.fixture
def damaged(store_path: Path) -> tuple[Path, tuple[int, int]]:
    return store_path, damage_record(store_path, 1)


@pytest.fixture
def client(store_path: Path) -> Iterator[TestClient]:
    with Viewer(open_viewed(store_path), default_format="png") as viewer:
        yield TestClient(viewer.app)


def test_a_damaged_record_is_a_clear_error_naming_the_frame(
    damaged: tuple[Path, tuple[int, int]], caplog: pytest.LogCaptureFixture
) -> None:
    path, (first, stop) = damaged
    with Viewer(open_viewed(path), default_format="png") as viewer:
        client = TestClient(viewer.app)
        with caplog.at_level(logging.WARNING, logger="hyperframes.viewer"):
            response = client.get(f"/api/frame/{first + 1}")
        assert response.status_code == 500
        assert response.headers["content-type"].startswith("text/plain")
        text = response.text
        assert f"frame {first + 1} cannot be read: the store is damaged" in text
        assert "hyperframes verify clip.hfs" in text and "\n" not in text
        assert "Traceback" not in text and str(path.parent) not in text  # no full path
        lines = [r for r in caplog.records if r.name == "hyperframes.viewer"]
        assert len(lines) == 1 and lines[0].exc_info is None
        assert f"frame {first + 1}" in lines[0].getMessage()
        # the rest of the store is still served
        assert client.get("/api/frame/0").status_code == 200
        assert client.get(f"/api/frame/{stop}").status_code == 200
        assert client.get("/api/stats").json()["requests"] == 2
        viewer.timeline.join(timeout=30)
        timeline = client.get("/api/timeline").json()
        assert timeline["error"] and "could not be computed" in timeline["error"]


@pytest.mark.parametrize(
    ("index", "status", "says"),
    [
        ("1" * 4301, 400, "too large"),  # over int()'s digit limit (4300)
        ("9" * 60_000, 400, "too large"),
        (str(MAX_INDEX + 1), 400, "too large"),  # would overflow int64
        (str(2**64), 400, "too large"),
        (str(MAX_INDEX), 404, "out of range"),
        (str(FRAMES), 404, "out of range"),
        ("0" * 5000 + "3", 200, ""),  # leading zeros are still frame 3
        ("%EF%BC%93", 404, "not found"),  # a full-width digit: int() would read 3
        ("%2B3", 404, "not found"),  # +3
        ("1_0", 404, "not found"),
        ("%203", 404, "not found"),  # " 3"
        ("3.0", 404, "not found"),
        ("-0", 404, "not found"),
        ("0x10", 404, "not found"),
    ],
)
def test_every_frame_index_gets_a_clean_answer(
    client: TestClient, index: str, status: int, says: str
) -> None:
    response = client.get(f"/api/frame/{index}")
    assert response.status_code == status, response.text[:200]
    if status != 200:
        assert says in response.text and len(response.text) < 200
        assert response.headers["content-type"].startswith("text/plain")
    else:
        assert response.headers["x-frame-index"] == "3"


def test_parse_index_never_calls_int_on_a_huge_number() -> None:
    assert parse_index("0042") == 42 and parse_index("0") == 0
    assert parse_index("") is None and parse_index("4\u0663") is None  # an Arabic-Indic 3
    with pytest.raises(ValueError, match=r"too large"):
        parse_index("7" * 50_000)  # int() would raise its own ValueError about digits
    with pytest.raises(ValueError, match=r"\(50000 digits\)"):
        parse_index("7" * 50_000)


@pytest.mark.parametrize(
    "query", ["format=bmp", "format=", "format=PNG", "format=png%00", "format=" + "j" * 5000]
)
def test_unknown_formats_are_bad_requests(client: TestClient, query: str) -> None:
    response = client.get(f"/api/frame/0?{query}")
    assert response.status_code == 400 and "jpeg" in response.text
    assert len(response.text) < 200  # the format is not echoed back


def test_unknown_query_parameters_are_ignored(client: TestClient) -> None:
    assert client.get("/api/frame/0?format=jpeg&x=" + "9" * 5000).status_code == 200
    assert client.get("/api/timeline?bins=" + "9" * 5000).status_code == 200


def test_a_frame_no_image_can_hold_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "two.hfs"
    frames = np.arange(4 * 6 * 8 * 2, dtype=np.uint8).reshape(4, 6, 8, 2)
    Pipeline.from_frames(frames, batch_size=4).group().to(StoreSink(path)).run()
    with Viewer(open_viewed(path)) as viewer:
        response = TestClient(viewer.app).get("/api/frame/1?format=jpeg")
        assert response.status_code == 500
        assert "frame 1 cannot be shown" in response.text and "(6, 8, 2)" in response.text


def test_an_unexpected_error_is_one_line_not_a_traceback(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(self: FrameServer) -> dict[str, object]:
        raise RuntimeError("boom\nsecond line")

    monkeypatch.setattr(FrameServer, "stats", broken)
    with caplog.at_level(logging.WARNING, logger="hyperframes.viewer"):
        response = client.get("/api/stats")
    assert response.status_code == 500
    assert response.text == "/api/stats failed: RuntimeError: boom second line"
    assert [r.exc_info for r in caplog.records if r.name == "hyperframes.viewer"] == [None]


@pytest.mark.parametrize(
    ("bind", "host", "status"),
    [
        ("127.0.0.1", "127.0.0.1:8765", 200),
        ("127.0.0.1", "localhost", 200),
        ("127.0.0.1", "LOCALHOST:1", 200),
        ("127.0.0.1", "evil.example", 400),
        ("127.0.0.1", "evil.example:8765", 400),
        ("127.0.0.1", "127.0.0.1.evil.example", 400),
        ("127.0.0.1", "localhost:80:80", 400),
        ("127.0.0.1", "", 400),
        ("::1", "[::1]:8765", 200),
        ("::1", "localhost:8765", 200),
        ("::1", "evil.example", 400),  # an IPv6 loopback bind used to accept any host
        ("::1", "[::2]", 400),
        ("0.0.0.0", "evil.example", 200),  # explicitly remote: names cannot be known
    ],
)
def test_host_headers_are_checked_on_loopback(
    client: TestClient, bind: str, host: str, status: int
) -> None:
    allowed = allowed_hosts(bind)
    app = create_app(allowed_hosts=allowed)
    response = TestClient(app).get("/api/meta", headers={"host": host})
    assert response.status_code == status
    if status == 400:
        assert "host" in response.text and "evil" not in response.text


def test_the_cli_console_shows_one_line_per_failure_and_no_traceback(
    damaged: tuple[Path, tuple[int, int]],
) -> None:
    """``hyperframes view`` for real: uvicorn, its logging, and the console it writes to."""
    path, (first, _) = damaged
    command = [sys.executable, "-m", "hyperframes", "view", str(path), "--port", "0"]
    proc = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        head = ""
        while "Ctrl-C" not in head:
            line = proc.stderr.readline()
            assert line, f"the viewer stopped before serving: {head}"
            head += line
        url = head.split(" at ", 1)[1].split()[0]
        statuses = {}
        for name in (f"{first}", "1" * 4301, "0", str(2**70)):
            try:
                with urllib.request.urlopen(f"{url}api/frame/{name}", timeout=10) as response:
                    statuses[name[:8]] = response.status
            except urllib.error.HTTPError as err:
                statuses[name[:8]] = err.code
                err.close()
        assert statuses == {f"{first}": 500, "11111111": 400, "0": 200, "11805916": 400}
    finally:
        proc.send_signal(signal.SIGINT)
        _, rest = proc.communicate(timeout=30)
    console = head + rest
    assert "Traceback" not in console and "Exception in ASGI" not in console, console
    damaged_lines = [line for line in console.splitlines() if "the store is damaged" in line]
    assert len(damaged_lines) == 1 and f"frame {first} " in damaged_lines[0], console
