"""The store's header, state and group-table bytes: round trips and validation."""

from __future__ import annotations

import json

import numpy as np
import pytest

from hyperframes import FrameSpec, StoreCorrupt, StoreError
from hyperframes.store import format as fmt


def _header(**changes: object) -> bytes:
    head = fmt.StoreHeader(FrameSpec((4, 6, 3)), {"fps": 25.0}, created_by="t").to_json()
    head.update(changes)
    return json.dumps(head).encode()


def test_header_round_trip() -> None:
    header = fmt.StoreHeader(
        FrameSpec((4, 6, 3), "uint16"), {"fps": 25.0, "rate": "25"}, "psnr", 40.0, 5,
        {"threshold": 0.001}, "x",
    )  # fmt: skip
    assert fmt.parse_header(fmt.dump_json(header.to_json())) == header


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        (None, "no header"),
        (b"\xff\xfe", "not valid JSON"),
        (b"[1, 2]", "JSON object"),
        (_header(format="other"), "format"),
        (_header(spec={"shape": [0, 4], "dtype": "|u1"}), "spec dimension"),
        (_header(spec={"shape": [1 << 20, 1 << 20, 3], "dtype": "|u1"}), "exceed"),
        (_header(spec={"shape": [4, 4], "dtype": "O"}), "dtype"),
        (_header(codec={"tier": "magic", "psnr": None, "level": 3}), "tier"),
        (_header(codec={"tier": "psnr", "psnr": -1, "level": 3}), "psnr"),
        (_header(codec={"tier": "lossless", "psnr": None, "level": 99}), "level"),
        (_header(source={"nested": {"a": 1}}), "source"),
        (_header(checksum="md5"), "checksum"),
        (_header(extra=1), "keys"),
        (b"x" * (fmt.MAX_JSON_BYTES + 1), "over"),
    ],
)
def test_bad_headers_name_the_problem(raw: bytes | None, words: str) -> None:
    with pytest.raises(StoreCorrupt, match=words):
        fmt.parse_header(raw)


def test_other_version_is_a_store_error_not_corruption() -> None:
    with pytest.raises(StoreError, match="version 5 is not supported") as info:
        fmt.parse_header(_header(version=5))
    assert not isinstance(info.value, StoreCorrupt)


@pytest.mark.parametrize(
    ("dtype", "tier", "pixels", "shape", "version"),
    [
        ("uint16", "lossless", None, (4, 6), 4),  # its groups may code against a surface
        ("int16", "lossless", None, (4, 6), 4),
        ("uint16", "lossless", None, (4, 6, 3), 4),
        ("uint16", "lossless", None, (4, 6, 5), 3),  # (more channels: zigzag alone)
        ("uint16", "lossless", None, (4, 6, 2, 2), 3),
        ("int32", "lossless", None, (4, 6), 3),  # its groups zigzag their residuals
        ("uint8", "lossless", None, (4, 6), 2),
        ("float32", "lossless", None, (4, 6), 2),
        ("uint16", "psnr", None, (4, 6), 2),
        ("uint16", "lossless", {"layout": "yuv420p10le"}, (4, 6), 2),  # planes: no zigzag
    ],
)
def test_stores_of_wide_integers_take_the_version_their_groups_need(
    dtype, tier, pixels, shape, version
) -> None:
    spec = FrameSpec(shape, dtype)
    assert fmt.version_for(spec, tier, pixels) == version
    header = fmt.StoreHeader(spec, created_by="t", version=version)
    assert fmt.parse_header(fmt.dump_json(header.to_json())).version == version


def test_state_round_trip_and_validation() -> None:
    state = fmt.StoreState(3, 10, 999, True, 41.5)
    assert fmt.parse_state(fmt.dump_state(state)) == state
    for bad, words in [
        ({"groups": 11, "frames": 10, "stored_bytes": 0, "complete": False, "psnr_min": None},
         "groups"),
        ({"groups": 1, "frames": -1, "stored_bytes": 0, "complete": False, "psnr_min": None},
         "frames"),
        ({"groups": 1, "frames": 1, "stored_bytes": 0, "complete": 1, "psnr_min": None},
         "complete"),
        ({"groups": 1, "frames": 1}, "keys"),
    ]:  # fmt: skip
        with pytest.raises(StoreCorrupt, match=words):
            fmt.parse_state(json.dumps(bad).encode())


def _entry(count: int = 3, first: int = 10) -> fmt.GroupEntry:
    return fmt.GroupEntry(first, count, 1234, 99, tuple(range(count)), (0.5,) * count)


def test_entry_round_trip() -> None:
    entry = _entry()
    assert fmt.parse_entry(fmt.pack_entry(entry), group=2, first=10) == entry


def test_entries_that_lie_are_refused() -> None:
    raw = fmt.pack_entry(_entry())
    with pytest.raises(StoreCorrupt, match="starts at frame 10"):
        fmt.parse_entry(raw, group=2, first=11)
    with pytest.raises(StoreCorrupt, match="bytes but 3 frames need"):
        fmt.parse_entry(raw[:-8], group=2, first=10)
    with pytest.raises(StoreCorrupt, match="missing"):
        fmt.parse_entry(None, group=2, first=10)
    with pytest.raises(StoreCorrupt, match="magic"):
        fmt.parse_entry(b"XXXX" + raw[4:], group=2, first=10)
    lying = bytearray(raw)
    lying[12:16] = np.uint32(1 << 30).tobytes()  # count: a billion frames
    with pytest.raises(StoreCorrupt, match="claims 1073741824 frames"):
        fmt.parse_entry(bytes(lying), group=2, first=10)
    with pytest.raises(StoreCorrupt, match="shorter"):
        fmt.parse_entry(raw[:10], group=2, first=10)


def test_json_safe_keeps_scalars_only() -> None:
    from fractions import Fraction

    info = {"fps": 25.0, "tb": Fraction(1, 12800), "bad": float("nan"), "obj": object()}
    assert fmt.json_safe(info) == {"fps": 25.0, "tb": "1/12800"}


def test_checksum_is_xxh3_of_the_raw_bytes() -> None:
    import xxhash

    frame = np.arange(24, dtype=np.uint8).reshape(2, 4, 3)
    assert fmt.checksum(frame) == xxhash.xxh3_64_intdigest(frame.tobytes())
    assert fmt.checksum(frame[:, ::2]) == xxhash.xxh3_64_intdigest(frame[:, ::2].tobytes())
