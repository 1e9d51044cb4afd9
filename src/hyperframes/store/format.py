"""The store's bytes: keys, the JSON header, the progress state, group-table entries.

Everything here is pure (no LMDB): it turns values into bytes and, on the way back,
validates every field of untrusted bytes before anything uses it. The full layout is
in ``docs/store-format.md``.

Keys (three LMDB databases; group keys are u64 big-endian, so they sort in order)::

    main     b"hf:header"   UTF-8 JSON, written once: format, version, spec, source, codec
    main     b"hf:state"    UTF-8 JSON, rewritten with every commit: groups, frames, ...
    table    group g        the group-table entry of group g (binary, see GroupEntry)
    records  group g        the encoded group (``hyperframes.hyper`` codec bytes)

Example:
    >>> entry = GroupEntry(first=0, count=2, record_len=10, record_hash=1,
    ...                    checksums=(5, 6), pts=(0.0, 0.04))
    >>> parse_entry(pack_entry(entry), group=0, first=0) == entry
    True

Longer than 300 lines: every field of the store's untrusted bytes is validated here, in
one place, so that nothing reads a field unchecked.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import xxhash

from ..choices import INTRAS, MAX_GOP, TIERS
from ..errors import StoreCorrupt, StoreError
from ..frames import FrameSpec
from ..hyper.codec import surface_frames
from ..io.layouts import NATIVE, TAGS, Layout, layout_for, tags_in

FORMAT_NAME = "hyperframes.store"
VERSION = 2
"""Version 2 added ``pixels`` (stores of a video's native planes); version 1 stores (0.1.0)
still open and resume as they were written."""
ZIGZAG_VERSION = 3
"""Version 3 (0.8.0): the version of lossless stores of integer frames wider than a byte,
whose groups zigzag their residuals; other stores stay version 2, so releases before 0.8
read them, and refuse these by their version, not by a group header they do not know."""
SURFACE_VERSION = 4
"""Version 4 (0.17.0): the version of lossless stores of 16-bit frames, whose groups may
code their frames against a fitted surface (``"predictor": "surface"``); releases before
0.17 refuse them by their version. A store of such frames resumed by this release takes
this version with its first new group."""
READABLE_VERSIONS = (1, 2, 3, 4)
HEADER_KEY = b"hf:header"
STATE_KEY = b"hf:state"
TABLE_DB = b"table"
RECORDS_DB = b"records"

MAX_JSON_BYTES = 1 << 20
MAX_GROUP_FRAMES = 1 << 16
"""The codec's own limit on frames per group."""
MAX_FRAMES = 1 << 40
MAX_FRAME_BYTES = 1 << 31
MAX_RECORD_BYTES = 1 << 40
DTYPES = frozenset({"|u1", "<u2", "<u4", "<u8", "|i1", "<i2", "<i4", "<i8", "<f2", "<f4", "<f8"})

_ENTRY_MAGIC = b"HGT1"
_ENTRY_HEAD = struct.Struct("<4sQIQQ")  # magic, first frame, count, record length, record hash
_KEY = struct.Struct(">Q")


def checksum(data: bytes | bytearray | memoryview | np.ndarray) -> int:
    """The per-frame checksum: xxh3_64 of the frame's raw bytes (C order)."""
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data).data
    return xxhash.xxh3_64_intdigest(data)


def group_key(group: int) -> bytes:
    """The key of group ``group`` in the table and records databases."""
    return _KEY.pack(group)


def key_group(key: bytes) -> int:
    """The group id of a table or records key.

    Raises:
        StoreCorrupt: a key of the wrong size.
    """
    if len(key) != _KEY.size:
        raise StoreCorrupt(f"a group key is {len(key)} bytes, expected {_KEY.size}")
    value: int = _KEY.unpack(key)[0]
    return value


@dataclass(frozen=True)
class StoreHeader:
    """The self-describing header, written once when a store is created.

    Attributes:
        spec: shape and dtype of every frame.
        source: facts about the input (``fps``, ``rate``, ``time_base``, ``codec``,
            ``path``...): JSON scalars only.
        tier: the codec tier (``"lossless"``, ``"psnr"`` or ``"keyframe"``).
        psnr: the PSNR target of the ``"psnr"`` tier, else ``None``.
        level: the zstd level.
        intra: how frames stored whole are coded, ``"gradient"``, ``"webp"``, ``"ffv1"``
            or ``"x264"`` (see :func:`hyperframes.hyper.encode_group`).
        gop: with ``intra="x264"``, frames from one keyframe to the next; else ``None``.
        grouping: the grouping options the store was packed with (informative), or ``None``.
        created_by: the library version that created the store.
        version: the format version.
        pixels: for a store of a video's native planes, the layout and colour tags
            (``{"layout": "yuv420p", "width": W, "height": H, "colorspace": 1, ...}``,
            see :func:`pixels_of`); ``None`` for frames stored as they came.
    """

    spec: FrameSpec
    source: dict[str, Any] = field(default_factory=dict)
    tier: str = "lossless"
    psnr: float | None = None
    level: int = 3
    grouping: dict[str, Any] | None = None
    created_by: str = ""
    version: int = VERSION
    intra: str = "gradient"
    pixels: dict[str, Any] | None = None
    gop: int | None = None

    @property
    def layout(self) -> Layout | None:
        """The planes' layout (``None`` unless the store holds a video's native planes)."""
        if self.pixels is None:
            return None
        return Layout.of(self.pixels["layout"], self.pixels["width"], self.pixels["height"])

    def to_json(self) -> dict[str, Any]:
        extra = {} if self.version == 1 else {"pixels": self.pixels}
        return extra | {
            "format": FORMAT_NAME,
            "version": self.version,
            "spec": {"shape": list(self.spec.shape), "dtype": self.spec.dtype.str},
            "source": self.source,
            "codec": {
                "tier": self.tier,
                "psnr": self.psnr,
                "level": self.level,
                "intra": self.intra,
            }
            | ({} if self.gop is None else {"gop": self.gop}),
            "grouping": self.grouping,
            "checksum": "xxh3_64",
            "created_by": self.created_by,
        }

    def same_encoding(self, other: StoreHeader) -> bool:
        """Whether frames appended under ``other`` decode like those under ``self``."""
        return (self.spec, self.tier, self.psnr, self.level, self.intra, self.grouping,
                self.pixels, self.gop) == (
            other.spec, other.tier, other.psnr, other.level, other.intra, other.grouping,
            other.pixels, other.gop,
        )  # fmt: skip


def version_for(spec: FrameSpec, tier: str, pixels: dict[str, Any] | None) -> int:
    """The format version a new store of frames of ``spec`` is written in."""
    wide = spec.dtype.kind in "ui" and spec.dtype.itemsize > 1
    if not (wide and tier == "lossless" and pixels is None):
        return VERSION
    return SURFACE_VERSION if surface_frames(spec.shape, spec.dtype) else ZIGZAG_VERSION


def pixels_of(spec: FrameSpec, info: dict[str, Any]) -> dict[str, Any] | None:
    """The ``pixels`` of a store of frames of ``spec`` from a source with ``info``: its
    native layout and colour tags when the source says it gives planes (``info["layout"]``,
    as :class:`~hyperframes.io.video.VideoSource` does for ``pix_fmt="native"`` and
    ``"yuv420p"``) and the frames still have that layout's shape, else ``None``."""
    name = info.get("layout")
    layout = layout_for(name, spec, info) if isinstance(name, str) else None
    if layout is None:
        return None
    return {"layout": name, "width": layout.width, "height": layout.height, **tags_in(info)}


@dataclass(frozen=True)
class StoreState:
    """How far the store has been written; committed in the same transaction as each group."""

    groups: int = 0
    frames: int = 0
    stored_bytes: int = 0
    complete: bool = False
    psnr_min: float | None = None
    """The lowest PSNR of any frame (lossy tiers), ``None`` when every frame is exact."""


@dataclass(frozen=True)
class GroupEntry:
    """One row of the group table: where a hyperframe's frames are and their checksums."""

    first: int
    count: int
    record_len: int
    record_hash: int
    checksums: tuple[int, ...]
    pts: tuple[float, ...]

    @property
    def stop(self) -> int:
        return self.first + self.count


def dump_json(value: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON; NaN and infinity are refused (they are not JSON)."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False, sort_keys=True).encode()


def json_safe(info: dict[str, Any]) -> dict[str, Any]:
    """The JSON-scalar items of a source's ``info`` (others are dropped, not pickled)."""
    out: dict[str, Any] = {}
    for key, value in info.items():
        if isinstance(value, float) and not math.isfinite(value):
            continue
        if isinstance(value, str | int | float | bool) or value is None:
            out[str(key)] = value
        elif hasattr(value, "numerator") and hasattr(value, "denominator"):
            out[str(key)] = f"{value.numerator}/{value.denominator}"
    return out


def _load_json(raw: bytes | None, what: str) -> dict[str, Any]:
    if raw is None:
        raise StoreCorrupt(f"the store has no {what}; it is not a hyperframes store or is damaged")
    if len(raw) > MAX_JSON_BYTES:
        raise StoreCorrupt(f"the store's {what} is {len(raw)} bytes, over {MAX_JSON_BYTES}")
    try:
        value = json.loads(bytes(raw).decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise StoreCorrupt(f"the store's {what} is not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise StoreCorrupt(f"the store's {what} must be a JSON object")
    return value


def _int(value: Any, what: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise StoreCorrupt(f"{what} must be an int in {low}..{high}, got {value!r}")
    return value


def parse_header(raw: bytes | None) -> StoreHeader:
    """Validate the header's bytes.

    Raises:
        StoreError: a store of another format version (the message says which).
        StoreCorrupt: a missing or malformed field.
    """
    head = _load_json(raw, "header")
    if head.get("format") != FORMAT_NAME:
        raise StoreCorrupt(f"header: format must be {FORMAT_NAME!r}, got {head.get('format')!r}")
    version = head.get("version")
    if version not in READABLE_VERSIONS or isinstance(version, bool):
        raise StoreError(
            f"header: store format version {version!r} is not supported (this library reads "
            f"versions {', '.join(map(str, READABLE_VERSIONS))}); open it with the hyperframes "
            "release that wrote it"
        )
    keys = {"format", "version", "spec", "source", "codec", "grouping", "checksum", "created_by"}
    if version >= 2:
        keys.add("pixels")
    if set(head) != keys:
        raise StoreCorrupt(f"header: expected the keys {sorted(keys)}, got {sorted(head)}")
    if head["checksum"] != "xxh3_64":
        raise StoreCorrupt(f"header: unknown checksum {head['checksum']!r}")
    spec = _parse_spec(head["spec"])
    codec = head["codec"]
    if not isinstance(codec, dict) or set(codec) - {"intra", "gop"} != {"tier", "psnr", "level"}:
        raise StoreCorrupt("header: codec must be {tier, psnr, level, intra[, gop]}")
    intra = codec.get("intra", "gradient")  # stores packed before 0.2 have no "intra"
    if intra not in INTRAS:
        raise StoreCorrupt(f"header: unknown codec intra {intra!r}")
    gop = codec.get("gop")
    if (gop is None) != (intra != "x264"):
        raise StoreCorrupt("header: codec gop is given exactly when intra is x264")
    if gop is not None:
        gop = _int(gop, "header: codec gop", 1, MAX_GOP)
    if codec["tier"] not in TIERS:
        raise StoreCorrupt(f"header: unknown codec tier {codec['tier']!r}")
    psnr = codec["psnr"]
    if psnr is not None and (
        isinstance(psnr, bool) or not isinstance(psnr, int | float) or not 0 < psnr <= 200
    ):
        raise StoreCorrupt(f"header: psnr must be null or a number in (0, 200], got {psnr!r}")
    level = _int(codec["level"], "header: codec level", 1, 22)
    source, grouping = head["source"], head["grouping"]
    if not isinstance(source, dict) or any(isinstance(v, dict | list) for v in source.values()):
        raise StoreCorrupt("header: source must be an object of JSON scalars")
    if grouping is not None and not isinstance(grouping, dict):
        raise StoreCorrupt("header: grouping must be an object or null")
    if not isinstance(head["created_by"], str):
        raise StoreCorrupt("header: created_by must be a string")
    pixels = _parse_pixels(head.get("pixels"), spec)
    return StoreHeader(
        spec, source, codec["tier"], None if psnr is None else float(psnr), level, grouping,
        head["created_by"], version, intra, pixels, gop,
    )  # fmt: skip


def _parse_pixels(value: Any, spec: FrameSpec) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or not {"layout", "width", "height"} <= set(value):
        raise StoreCorrupt("header: pixels must be null or {layout, width, height, tags}")
    if set(value) - {"layout", "width", "height", *TAGS}:
        raise StoreCorrupt(f"header: unknown keys in pixels: {sorted(value)}")
    if value["layout"] not in NATIVE:
        raise StoreCorrupt(f"header: unknown pixel layout {value['layout']!r}")
    width = _int(value["width"], "header: pixels width", 1, MAX_FRAME_BYTES)
    height = _int(value["height"], "header: pixels height", 1, MAX_FRAME_BYTES)
    for key in TAGS:
        if key in value:
            _int(value[key], f"header: pixels {key}", 0, 255)
    if Layout.of(value["layout"], width, height).spec != spec:
        raise StoreCorrupt(
            f"header: {value['layout']} planes of {width}x{height} are not frames of "
            f"{spec.describe()}"
        )
    return dict(value)


def _parse_spec(value: Any) -> FrameSpec:
    if not isinstance(value, dict) or set(value) != {"shape", "dtype"}:
        raise StoreCorrupt("header: spec must be {shape, dtype}")
    shape, dtype = value["shape"], value["dtype"]
    if not isinstance(shape, list) or not 1 <= len(shape) <= 8:
        raise StoreCorrupt(f"header: spec shape must be a list of 1 to 8 ints, got {shape!r}")
    dims = tuple(_int(d, "header: a spec dimension", 1, MAX_FRAME_BYTES) for d in shape)
    if dtype not in DTYPES:
        raise StoreCorrupt(f"header: unsupported spec dtype {dtype!r}")
    spec = FrameSpec(dims, dtype)
    if spec.nbytes > MAX_FRAME_BYTES:
        raise StoreCorrupt(f"header: frames of {spec.describe()} exceed {MAX_FRAME_BYTES} bytes")
    return spec


def dump_state(state: StoreState) -> bytes:
    return dump_json(
        {
            "groups": state.groups,
            "frames": state.frames,
            "stored_bytes": state.stored_bytes,
            "complete": state.complete,
            "psnr_min": state.psnr_min,
        }
    )


def parse_state(raw: bytes | None) -> StoreState:
    """Validate the state's bytes.

    Raises:
        StoreCorrupt: a missing or malformed field.
    """
    state = _load_json(raw, "state")
    keys = {"groups", "frames", "stored_bytes", "complete", "psnr_min"}
    if set(state) != keys:
        raise StoreCorrupt(f"state: expected the keys {sorted(keys)}, got {sorted(state)}")
    frames = _int(state["frames"], "state: frames", 0, MAX_FRAMES)
    groups = _int(state["groups"], "state: groups", 0, frames)
    stored = _int(state["stored_bytes"], "state: stored_bytes", 0, MAX_RECORD_BYTES)
    if not isinstance(state["complete"], bool):
        raise StoreCorrupt("state: complete must be true or false")
    low = state["psnr_min"]
    if low is not None and (isinstance(low, bool) or not isinstance(low, int | float)):
        raise StoreCorrupt(f"state: psnr_min must be null or a number, got {low!r}")
    return StoreState(groups, frames, stored, state["complete"], None if low is None else low)


def pack_entry(entry: GroupEntry) -> bytes:
    head = _ENTRY_HEAD.pack(
        _ENTRY_MAGIC, entry.first, entry.count, entry.record_len, entry.record_hash
    )
    sums = np.asarray(entry.checksums, dtype="<u8").tobytes()
    pts = np.asarray(entry.pts, dtype="<f8").tobytes()
    return head + sums + pts


def parse_entry(raw: bytes | memoryview | None, *, group: int, first: int) -> GroupEntry:
    """Validate group ``group``'s table entry, which must start at frame ``first``.

    Raises:
        StoreCorrupt: a missing entry, a bad size, count or length, or a gap in the frames.
    """
    where = f"group table entry {group}"
    if raw is None:
        raise StoreCorrupt(f"{where} is missing")
    if len(raw) < _ENTRY_HEAD.size:
        raise StoreCorrupt(f"{where} is {len(raw)} bytes, shorter than its fixed part")
    magic, start, count, length, digest = _ENTRY_HEAD.unpack_from(raw)
    if magic != _ENTRY_MAGIC:
        raise StoreCorrupt(f"{where} has a bad magic {magic!r}")
    if start != first:
        raise StoreCorrupt(f"{where} starts at frame {start}; the table says frame {first}")
    if not 1 <= count <= MAX_GROUP_FRAMES:
        raise StoreCorrupt(f"{where} claims {count} frames; allowed 1..{MAX_GROUP_FRAMES}")
    if len(raw) != _ENTRY_HEAD.size + 16 * count:
        raise StoreCorrupt(
            f"{where} is {len(raw)} bytes but {count} frames need {_ENTRY_HEAD.size + 16 * count}"
        )
    if not 0 < length <= MAX_RECORD_BYTES:
        raise StoreCorrupt(f"{where} claims a record of {length} bytes")
    body = np.frombuffer(raw, dtype=np.uint8, offset=_ENTRY_HEAD.size)
    sums = body[: 8 * count].view("<u8")
    pts = body[8 * count :].view("<f8")
    return GroupEntry(start, count, length, digest, tuple(sums.tolist()), tuple(pts.tolist()))
