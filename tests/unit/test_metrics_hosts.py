"""The ``Host`` rule the Prometheus endpoint and the viewer share (DNS-rebinding defence)."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from hyperframes.engine.watch import RunSnapshot
from hyperframes.metrics.hosts import allowed_hosts, host_allowed, is_loopback, split_host
from hyperframes.metrics.prometheus import PrometheusExporter

pytest.importorskip("prometheus_client")


@pytest.mark.parametrize(
    ("header", "name"),
    [
        ("localhost", "localhost"),
        ("LocalHost:8765", "localhost"),
        ("127.0.0.1:9464", "127.0.0.1"),
        ("[::1]", "::1"),
        ("[::1]:9464", "::1"),
        (" localhost ", "localhost"),
        ("localhost:", "localhost"),  # an empty port is allowed by RFC 9110
        ("", None),
        ("::1", None),  # an IPv6 address needs brackets
        ("[::1", None),
        ("[::1]x", None),
        ("[]:80", None),
        ("localhost:80:80", None),
        ("localhost:8o", None),
        ("localhost:\uff18", None),  # a full-width digit
        (":80", None),
        ("a" * 300, None),
    ],
)
def test_split_host(header: str, name: str | None) -> None:
    assert split_host(header) == name


def test_loopback_binds_accept_loopback_names_and_their_own_address() -> None:
    assert allowed_hosts("127.0.0.1") == ["127.0.0.1", "localhost"]
    assert allowed_hosts("127.0.0.2") == ["127.0.0.1", "127.0.0.2", "localhost"]
    assert allowed_hosts("[::1]") == allowed_hosts("::1") == ["127.0.0.1", "::1", "localhost"]
    assert allowed_hosts("localhost") == ["127.0.0.1", "localhost"]
    for remote in ("0.0.0.0", "::", "192.168.1.5", "example.com"):
        assert not is_loopback(remote) and allowed_hosts(remote) is None
        assert host_allowed("anything.example", allowed_hosts(remote))
    hosts = allowed_hosts("::1")
    assert host_allowed("[::1]:9464", hosts) and host_allowed("localhost", hosts)
    assert not host_allowed("evil.example", hosts) and not host_allowed(None, hosts)
    assert not host_allowed("localhost.evil.example", hosts)


@pytest.fixture
def exporter() -> Iterator[PrometheusExporter]:
    exporter = PrometheusExporter(port=0)  # 127.0.0.1
    exporter.start(lambda: RunSnapshot(elapsed_s=1.0, frames=3, total=None, batch_size=1))
    try:
        yield exporter
    finally:
        exporter.stop(None)


def raw_get(port: int, host: str | None) -> tuple[int, bytes]:
    """``GET /metrics`` on 127.0.0.1:``port`` with exactly this ``Host`` line (or none)."""
    lines = ["GET /metrics HTTP/1.1" if host is not None else "GET /metrics HTTP/1.0"]
    if host is not None:
        lines.append(f"Host: {host}")
    request = "\r\n".join([*lines, "Connection: close", "", ""]).encode()
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(request)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    head, _, body = b"".join(chunks).partition(b"\r\n\r\n")
    return int(head.split()[1]), body


@pytest.mark.parametrize(
    ("host", "status"),
    [
        ("evil.example", 403),
        ("evil.example:{port}", 403),
        ("127.0.0.1.evil.example", 403),
        ("[::1]", 403),  # not this IPv4 server's address
        (None, 403),  # no Host at all
        ("127.0.0.1:{port}", 200),
        ("localhost:{port}", 200),
        ("LOCALHOST", 200),
    ],
)
def test_the_endpoint_refuses_foreign_host_headers(
    exporter: PrometheusExporter, host: str | None, status: int
) -> None:
    assert exporter.port is not None
    got, body = raw_get(exporter.port, None if host is None else host.format(port=exporter.port))
    assert got == status
    if status == 403:
        assert b"Host header must be one of 127.0.0.1, localhost" in body
        assert b"hyperframes_" not in body
    else:
        assert b"hyperframes_frames_delivered_total 3.0" in body
