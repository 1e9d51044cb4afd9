"""Codec: bit-exact round trips, random access, lossy targets and untrusted bytes."""

from __future__ import annotations

import json
import struct

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from hyperframes.errors import FrameError, StoreCorrupt
from hyperframes.hyper import (
    decode_frame,
    decode_group,
    encode_group,
    psnr,
    read_group_info,
)
from hyperframes.hyper.codec import group_header as fmt

DTYPES = ["uint8", "uint16", "uint32", "int16", "float16", "float32", "float64"]
LAYOUTS = ["auto", "independent", "base", "chain"]


def _same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


@st.composite
def groups(draw: st.DrawFn, dtypes: list[str] = DTYPES) -> np.ndarray:
    dtype = np.dtype(draw(st.sampled_from(dtypes)))
    n = draw(st.integers(1, 20))
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=6))
    base = draw(hnp.arrays(dtype, shape))
    similar = draw(st.booleans())
    frames = [base]
    for _ in range(n - 1):  # mostly-equal neighbours, with fresh values in some places
        nxt = frames[-1].copy() if similar else draw(hnp.arrays(dtype, shape))
        if similar:
            mask = draw(hnp.arrays(np.bool_, shape))
            nxt[mask] = draw(hnp.arrays(dtype, shape))[mask]
        frames.append(nxt)
    return np.stack(frames)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frames=groups(), layout=st.sampled_from(LAYOUTS), base=st.sampled_from(["first", "middle"]))
def test_lossless_round_trip_is_bit_exact(frames: np.ndarray, layout: str, base: str) -> None:
    group = encode_group(frames, layout=layout, base=base, level=1)  # type: ignore[arg-type]
    assert group.psnr_min == float("inf")
    assert _same_bits(decode_group(group.data), frames)
    for i in range(len(frames)):
        assert _same_bits(decode_frame(group.data, i), frames[i])


def test_nan_and_signed_zero_survive() -> None:
    frames = np.array([[np.nan, -0.0, np.inf], [np.nan, 0.0, -np.inf]], dtype=np.float32)
    out = decode_group(encode_group(frames).data)
    assert _same_bits(out, frames)


def test_random_access_touches_few_records() -> None:
    frames = np.arange(60, dtype=np.uint8)[:, None, None].repeat(8, 1).repeat(8, 2)
    info = read_group_info(encode_group(frames).data)
    assert info.count == 60 and info.base == 30 and info.layout == "auto"
    assert max(info.frames_touched) <= 60 // 16 + 8
    assert max(read_group_info(encode_group(frames, layout="base").data).frames_touched) == 2
    indep = read_group_info(encode_group(frames, layout="independent").data)
    assert set(indep.frames_touched) == {1}


def test_deltas_beat_independent_on_slow_change() -> None:
    rng = np.random.default_rng(0)
    base = rng.integers(0, 256, (64, 64, 3), dtype=np.uint8)
    frames = np.stack([base] * 10)
    frames[:, :4, :4] = np.arange(10, dtype=np.uint8)[:, None, None, None]
    assert encode_group(frames).ratio < encode_group(frames, layout="independent").ratio / 3


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frames=groups(["uint8", "uint16", "float32", "float64"]),
    target=st.sampled_from([30.0, 45.0, 60.0]),
)
def test_psnr_tier_meets_target_on_every_frame(frames: np.ndarray, target: float) -> None:
    if frames.dtype.kind == "f":
        frames = np.nan_to_num(frames, nan=0.5, posinf=1.0, neginf=0.0).clip(0, 1)
    group = encode_group(frames, tier="psnr", psnr=target)
    out = decode_group(group.data)
    scores = [psnr(out[i], frames[i]) for i in range(len(frames))]
    assert min(scores) >= target
    assert group.psnr_min == pytest.approx(min(scores))
    for i in range(len(frames)):
        assert _same_bits(decode_frame(group.data, i), out[i])


def test_psnr_tier_shrinks_noisy_frames() -> None:
    rng = np.random.default_rng(3)
    base = rng.integers(20, 230, (64, 64, 3)).astype(np.int16)
    frames = np.stack([base + rng.integers(-6, 7, base.shape) for _ in range(8)]).astype(np.uint8)
    lossy = encode_group(frames, tier="psnr", psnr=40)
    assert lossy.psnr_min >= 40
    assert len(lossy.data) < 0.8 * len(encode_group(frames).data)


def test_keyframe_tier_decodes_every_frame_to_base() -> None:
    frames = np.arange(5, dtype=np.uint8)[:, None, None].repeat(4, 1) * 10
    group = encode_group(frames, tier="keyframe")
    out = decode_group(group.data)
    assert all(np.array_equal(f, frames[2]) for f in out)
    assert group.frame_psnr[2] == float("inf")
    assert group.psnr_min == pytest.approx(psnr(frames[0], frames[2]))
    assert group.psnr_min < group.psnr_mean < float("inf")


@pytest.mark.parametrize(
    "kwargs",
    [
        {"tier": "best"},
        {"layout": "zigzag"},
        {"base": "last"},
        {"level": 0},
        {"level": 23},
        {"psnr": 0},
        {"psnr": float("nan")},
    ],
)
def test_bad_options_raise_value_error(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="must"):
        encode_group(np.zeros((2, 3), np.uint8), **kwargs)


def test_bad_frames_raise_frame_error() -> None:
    with pytest.raises(FrameError):
        encode_group(np.zeros((0, 3), np.uint8))
    with pytest.raises(FrameError):
        encode_group(np.zeros((2, 3), bool))
    with pytest.raises(FrameError):
        encode_group([np.zeros(3, np.uint8), np.zeros(4, np.uint8)])
    nan = np.full((2, 3), np.nan, np.float32)
    with pytest.raises(FrameError, match="frame 0"):
        encode_group(nan, tier="psnr")


def test_index_out_of_range() -> None:
    data = encode_group(np.zeros((3, 2), np.uint8)).data
    with pytest.raises(IndexError):
        decode_frame(data, 3)
    with pytest.raises(IndexError):
        decode_frame(data, -1)


_SAMPLE_FRAMES = np.random.default_rng(5).integers(0, 4, (6, 8, 8), dtype=np.uint16) * 1000
_SAMPLE = encode_group(_SAMPLE_FRAMES).data
_RECORDS_AT = 8 + struct.unpack("<I", _SAMPLE[4:8])[0]
"""Where the records start: zstd frames, each with its content size and checksum."""


def _decode_all(data: bytes) -> np.ndarray:
    """The whole group, after checking that every frame decoded alone is the same."""
    info = read_group_info(data)
    whole = decode_group(data)
    assert whole.shape == (info.count, *info.shape) and whole.dtype == info.dtype
    for i in range(info.count):
        assert _same_bits(decode_frame(data, i), whole[i]), f"frame {i} alone differs"
    return whole


@settings(max_examples=150, deadline=None)
@given(
    edits=st.lists(st.tuples(st.integers(0, len(_SAMPLE) - 1), st.integers(0, 255)), max_size=4),
    cut=st.integers(0, len(_SAMPLE)),
)
def test_corrupt_bytes_raise_store_corrupt_or_decode_exactly(
    edits: list[tuple[int, int]], cut: int
) -> None:
    """Damaged bytes raise StoreCorrupt and nothing else; damage confined to the records
    never decodes to other pixels (their zstd checksums). The group header has no checksum
    of its own: an edited header may describe other pixels, and decodes to exactly what it
    describes; the store's record checksum is what catches it (test_fuzz_and_security)."""
    data = bytearray(_SAMPLE[:cut])
    for pos, value in edits:
        if pos < len(data):
            data[pos] = value
    try:
        decoded = _decode_all(bytes(data))
    except StoreCorrupt:
        return
    header_intact = cut >= _RECORDS_AT and all(pos >= _RECORDS_AT for pos, _ in edits)
    if header_intact:
        assert _same_bits(decoded, _SAMPLE_FRAMES), "damaged records decoded to other pixels"


def _with_header(**changes: object) -> bytes:
    size = struct.unpack("<I", _SAMPLE[4:8])[0]
    head = json.loads(_SAMPLE[8 : 8 + size])
    head.update(changes)
    text = json.dumps(head).encode()
    return _SAMPLE[:4] + struct.pack("<I", len(text)) + text + _SAMPLE[8 + size :]


@pytest.mark.parametrize(
    "changes",
    [
        {"dtype": "O"},
        {"dtype": ">f8"},
        {"shape": [0, 8]},
        {"shape": [1 << 20, 1 << 20]},
        {"shape": "8x8"},
        {"base": 99},
        {"layout": "magic"},
        {"frames": []},
        {"frames": [["raw", -1, 0, 10**9, 0, ""]] * 6},
        {"frames": [["delta", 1, 0, 0, 0, ""], ["delta", 0, 0, 0, 0, ""]]},
        {"frames": [["quant", 0, 0, 0, -1.0, "<i2"]] + [["raw", -1, 0, 0, 0, ""]] * 5},
        {"extra": 1},
    ],
)
def test_forged_headers_raise_store_corrupt(changes: dict) -> None:
    with pytest.raises(StoreCorrupt):
        _decode_all(_with_header(**changes))


def test_wide_integer_residuals_are_zigzagged_smaller_and_plain_ones_still_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from hyperframes.hyper.codec import _lossless, coder
    from hyperframes.hyper.codec._pixels import from_zigzag, to_zigzag

    for dtype in ("<u2", "<u4", "<u8"):
        info = np.iinfo(dtype)
        r = np.array([0, 1, info.max, info.max - 1, info.max // 2, info.max // 2 + 1], dtype)
        z = to_zigzag(r)  # 0, -1, 1, -2 (wrapped) -> 0, 1, 2, 3
        assert z[:4].tolist() == [0, 2, 1, 3] and _same_bits(from_zigzag(z), r)
    rng = np.random.default_rng(8)
    frames = (30_000 + rng.normal(0, 40, (8, 48, 64)).cumsum(0)).astype(np.uint16)
    zigzagged = encode_group(frames).data
    assert b'"residuals":"zigzag"' in bytes(zigzagged[:4096])
    for other in (frames.astype(np.uint8), frames.astype(np.float32)):
        assert b"residuals" not in bytes(encode_group(other).data[:4096])
    assert b"residuals" not in bytes(encode_group(frames, tier="psnr", psnr=50).data[:4096])
    monkeypatch.setattr(_lossless, "zigzags", lambda arr, tier: False)
    monkeypatch.setattr(coder, "zigzags", lambda arr, tier: False)
    plain = encode_group(frames).data  # as groups were written before 0.8
    assert b"residuals" not in bytes(plain[:4096])
    assert len(zigzagged) < 0.9 * len(plain)
    for data in (zigzagged, plain):
        assert _same_bits(_decode_all(data), frames)


@pytest.mark.parametrize(
    ("frames", "residuals"),
    [
        (_SAMPLE_FRAMES, "twos"),
        (_SAMPLE_FRAMES.astype(np.uint8), "zigzag"),
        (_SAMPLE_FRAMES.astype(np.float32), "zigzag"),
    ],
)
def test_zigzag_residuals_only_where_they_can_be(frames: np.ndarray, residuals: str) -> None:
    data = encode_group(frames).data
    size = struct.unpack("<I", data[4:8])[0]
    head = json.loads(data[8 : 8 + size])
    head["residuals"] = residuals
    text = json.dumps(head).encode()
    with pytest.raises(StoreCorrupt, match="residuals"):
        decode_group(data[:4] + struct.pack("<I", len(text)) + text + data[8 + size :])


def test_not_bytes_is_type_error() -> None:
    with pytest.raises(TypeError):
        decode_group("HFG")  # type: ignore[arg-type]


def test_repr_hides_pixels() -> None:
    group = encode_group(np.zeros((2, 4, 4), np.uint8))
    assert "data=" not in repr(group) and "nbytes=" in repr(group)


def test_gradient_predictor_round_trip_and_header():
    from hyperframes.hyper.codec._pixels import gradient as _gradient
    from hyperframes.hyper.codec._pixels import ungradient as _ungradient

    rng = np.random.default_rng(3)
    frames = rng.integers(0, 256, (5, 17, 9, 3), dtype=np.uint8)
    for shape in [(17, 9, 3), (17, 9), (8, 6, 1), (8, 6, 4), (6, 5, 7), (4, 3, 2, 2)]:
        x = rng.integers(0, 256, shape, dtype=np.uint8)  # OpenCV and numpy paths
        np.testing.assert_array_equal(_ungradient(_gradient(x)), x)
    group = encode_group(frames)
    assert b'"predictor":"gradient"' in bytes(group.data[:4096])
    np.testing.assert_array_equal(decode_group(group.data), frames)
    for i in range(5):
        np.testing.assert_array_equal(decode_frame(group.data, i), frames[i])


def test_smooth_frames_compress_better_with_the_predictor():
    y, x = np.mgrid[0:64, 0:96]
    frame = np.stack([(x * 2 + y) % 256, (x + y * 3) % 256, (x * y) % 256], -1).astype(np.uint8)
    frames = np.stack([np.roll(frame, k, axis=1) for k in range(4)])
    group = encode_group(frames)
    import zstandard

    plain = sum(len(zstandard.ZstdCompressor(level=3).compress(f.tobytes())) for f in frames)
    assert len(group.data) < plain
    np.testing.assert_array_equal(decode_group(group.data), frames)


@pytest.mark.parametrize(
    ("shape", "transformed"), [((9, 7, 3), True), ((9, 7, 4), False), ((9, 7), False)]
)
def test_colour_transform_for_lossless_rgb_only(shape, transformed):
    from hyperframes.hyper.codec._pixels import rct as _rct
    from hyperframes.hyper.codec._pixels import unrct as _unrct

    rng = np.random.default_rng(11)
    frames = rng.integers(0, 256, (6, *shape), dtype=np.uint8)
    frames[3] = frames[2]  # a copy record in the transformed space
    group = encode_group(frames)
    assert (b'"transform":"rct"' in bytes(group.data[:4096])) == transformed
    np.testing.assert_array_equal(decode_group(group.data), frames)
    for i in range(6):
        np.testing.assert_array_equal(decode_frame(group.data, i), frames[i])
    if transformed:
        np.testing.assert_array_equal(_unrct(_rct(frames)), frames)
        lossy = encode_group(frames, tier="psnr", psnr=40)
        assert b'"transform"' not in bytes(lossy.data[:4096])


def test_webp_intra_is_bit_exact_and_smaller_on_smooth_rgb():
    y, x = np.mgrid[0:48, 0:80]
    frame = np.stack([(x * 3 + y) % 256, (x + y * 2) % 256, (x ^ y) % 256], -1).astype(np.uint8)
    frames = np.stack([np.roll(frame, 5 * k, axis=1) for k in range(6)])
    frames[4] = frames[3]  # a copy record
    frames[5, 10:20] = 7  # a small change: a delta
    webp = encode_group(frames, intra="webp")
    assert b'"predictor":"webp"' in bytes(webp.data[:4096])
    np.testing.assert_array_equal(decode_group(webp.data), frames)
    for i in range(6):
        np.testing.assert_array_equal(decode_frame(webp.data, i), frames[i])
    assert len(webp.data) < len(encode_group(frames).data)


@pytest.mark.parametrize(
    ("frames", "tier"),
    [
        (np.zeros((3, 8, 8), np.uint8), "lossless"),  # grey
        (np.zeros((3, 8, 8, 4), np.uint8), "lossless"),  # RGBA
        (np.zeros((3, 8, 8, 3), np.uint16), "lossless"),
        (np.zeros((3, 8, 8, 3), np.uint8), "keyframe"),
        (np.arange(360, dtype=np.uint8).reshape(3, 40, 3), "lossless"),  # (W, 3): not RGB
        (np.zeros((3, 8, 8, 2, 3), np.uint8), "lossless"),  # 3-D frames
    ],
)
def test_webp_intra_falls_back_where_webp_cannot_be_exact(frames, tier):
    group = encode_group(frames, intra="webp", tier=tier)
    assert b'"predictor":"webp"' not in bytes(group.data[:4096])
    np.testing.assert_array_equal(decode_group(group.data), frames)


def test_damaged_webp_record_raises_store_corrupt():
    frames = np.random.default_rng(2).integers(0, 256, (2, 16, 16, 3), dtype=np.uint8)
    data = bytearray(encode_group(frames, layout="independent", intra="webp").data)
    size = struct.unpack("<I", data[4:8])[0]
    data[8 + size + 20 : 8 + size + 60] = bytes(40)  # inside the first WebP record
    with pytest.raises(StoreCorrupt):
        _decode_all(bytes(data))
    head = json.loads(data[8 : 8 + size])
    assert head["predictor"] == "webp"
    with pytest.raises(StoreCorrupt, match="webp predictor needs uint8"):
        _decode_all(_with_header(predictor="webp"))  # on uint16 frames


def _big_frames(n: int, h: int, w: int) -> np.ndarray:
    y, x = np.mgrid[0:h, 0:w]
    rng = np.random.default_rng(h)
    base = np.stack([(x + y) % 256, (x * 2) % 256, (y * 3) % 256], -1).astype(np.uint8)
    frames = np.stack([np.roll(base, 3 * k, axis=1) for k in range(n)])
    frames[1] = frames[0]  # a copy
    frames[-1] = rng.integers(0, 256, frames[-1].shape, dtype=np.uint8)  # stored alone
    return frames


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize(("h", "bands"), [(256, 2), (720, 4), (100, 1)])
def test_large_frames_decode_in_bands_bit_exact(layout: str, h: int, bands: int) -> None:
    frames = _big_frames(5, h, 512)
    data = encode_group(frames, layout=layout).data
    head = fmt.parse_header(data)
    assert head.bands == bands
    if bands > 1:
        assert all(len(r.parts) == bands for r in head.records if r.kind in ("raw", "delta"))
    np.testing.assert_array_equal(decode_group(data), frames)
    for i in range(5):
        np.testing.assert_array_equal(decode_frame(data, i), frames[i])


def test_banded_headers_are_validated() -> None:
    data = encode_group(_big_frames(3, 256, 512), layout="independent").data
    size = struct.unpack("<I", data[4:8])[0]
    head = json.loads(data[8 : 8 + size])

    def forged(**changes: object) -> bytes:
        text = json.dumps(dict(head, **changes)).encode()
        return data[:4] + struct.pack("<I", len(text)) + text + data[8 + size :]

    first = head["frames"][0]
    lengths = first[6]
    for frames in (
        [[*first[:6], [lengths[0] + 1, lengths[1] - 1 - 1]], *head["frames"][1:]],  # sum off
        [[*first[:6], [first[3]]], *head["frames"][1:]],  # one length for two bands
        [first[:6], *head["frames"][1:]],  # no lengths at all
    ):
        with pytest.raises(StoreCorrupt):
            _decode_all(forged(frames=frames))
    swapped = [[*first[:6], lengths[::-1]], *head["frames"][1:]]  # wrong split point
    if lengths[0] != lengths[1]:
        with pytest.raises(StoreCorrupt):
            _decode_all(forged(frames=swapped))
    for bands in (0, 3, 10**6, "2"):
        with pytest.raises(StoreCorrupt):
            _decode_all(forged(bands=bands))


def test_lossless_groups_refuse_quantised_records() -> None:
    data = encode_group(_big_frames(3, 256, 512), layout="base").data
    size = struct.unpack("<I", data[4:8])[0]
    head = json.loads(data[8 : 8 + size])
    entry = next(e for e in head["frames"] if e[0] == "delta")
    entry[:] = ["quant", entry[1], entry[2], entry[3], 1.0, "|i1"]
    text = json.dumps(head).encode()
    with pytest.raises(StoreCorrupt, match="quantised"):
        _decode_all(data[:4] + struct.pack("<I", len(text)) + text + data[8 + size :])


def test_webp_records_must_be_lossless_webp_of_the_frame_size() -> None:
    import cv2

    from hyperframes.hyper.codec._pixels import webp_decode as _from_webp

    frame = np.random.default_rng(4).integers(0, 256, (16, 24, 3), dtype=np.uint8)
    png = cv2.imencode(".png", frame)[1].tobytes()
    webp = cv2.imencode(".webp", frame, [cv2.IMWRITE_WEBP_QUALITY, 101])[1].tobytes()
    # cv2 took ``frame`` as BGR; the record comes back in RCT space, (G, R - G, B - G) mod 256
    r, g, b = (frame[..., c].astype(np.int64) for c in (2, 1, 0))
    coded = np.stack([g, (r - g) % 256, (b - g) % 256], axis=-1).astype(np.uint8)
    np.testing.assert_array_equal(_from_webp(memoryview(webp), (16, 24, 3)), coded.reshape(-1))
    for blob, shape in [(png, (16, 24, 3)), (b"", (16, 24, 3)), (webp, (1 << 14, 24, 3))]:
        with pytest.raises(StoreCorrupt):
            _from_webp(memoryview(blob), shape)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # fork with threads (3.12+)
def test_banded_decoding_works_in_a_forked_child() -> None:
    import os
    import signal

    frames = _big_frames(2, 256, 512)
    data = encode_group(frames).data
    decode_frame(data, 0)  # the band pool now has threads, which a fork does not copy
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest, whatever decoding does
        code = 2  # an exception (or anything else that is not a clean decode)
        try:
            signal.signal(signal.SIGALRM, signal.SIG_DFL)  # not pytest-timeout's handler
            signal.alarm(20)  # a hang ends the child by SIGALRM
            code = 0 if decode_frame(data, 0).tobytes() == frames[0].tobytes() else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "1: a wrong frame, 2: decoding raised"


def _planar_clip(n: int = 10, h: int = 48, w: int = 64, moving: bool = True) -> np.ndarray:
    """``n`` yuv420p frames (flat planes): smooth gradients with noise, shifting if
    ``moving``."""
    rng = np.random.default_rng(18)
    yy, xx = np.mgrid[0:h, 0:w]
    out = []
    for i in range(n):
        shift = 3 * i if moving else 0
        y = (yy * 2 + (xx + shift) * 3) % 256 + rng.integers(0, 6, (h, w))
        c = (yy[: h // 2, : w // 2] + shift) % 256
        out.append(np.concatenate([y.ravel(), c.ravel(), (255 - c).ravel()]).astype(np.uint8))
    return np.stack(out)


PLANES_420 = [(48, 64), (24, 32), (24, 32)]


def test_delta_probe_keeps_deltas_of_similar_frames_and_skips_unrelated_ones() -> None:
    import zstandard as zstd

    from hyperframes.hyper.codec._planes import delta_may_pay

    compress = zstd.ZstdCompressor(level=1).compress
    frames = _planar_clip(2, h=96, moving=False)
    noise = np.random.default_rng(3).integers(0, 256, frames[0].shape, dtype=np.uint8)
    assert delta_may_pay(frames[1], frames[0], (96, 64), compress)
    assert not delta_may_pay(frames[1], noise, (96, 64), compress)
    assert delta_may_pay(frames[1], noise, (8, 64), compress)  # too few rows to judge


@pytest.mark.parametrize("intra", ["gradient", "ffv1"])
def test_planar_groups_round_trip_whatever_the_probe_decides(intra: str) -> None:
    frames = _planar_clip(12, h=96, moving=False)  # tall enough for the delta probe
    yy, xx = np.mgrid[0:96, 0:64]
    frames[7, : 96 * 64] = ((yy * 5 + xx * 7) % 256).ravel()  # smooth, unlike its reference
    frames[8] = frames[6]  # a copy two frames apart
    planes = [(96, 64), (48, 32), (48, 32)]
    group = encode_group(frames, planes=planes, intra=intra, pix_fmt="yuv420p")
    kinds = [r.kind for r in fmt.parse_header(memoryview(group.data)).records]
    assert kinds[7] == "raw"
    assert intra == "ffv1" or "delta" in kinds  # FFV1 codes these noisy frames smaller
    assert _same_bits(decode_group(group.data), frames)
    for i in (7, 0, 11, 8):
        assert _same_bits(decode_frame(group.data, i), frames[i])


def test_ffv1_intra_keeps_the_gradient_on_near_flat_frames() -> None:
    flat = np.full((3, 48 * 64 + 2 * 24 * 32), 16, np.uint8)
    flat[:, :64] = np.arange(64)  # a ramp: the gradient codes it to almost nothing
    group = encode_group(flat, planes=PLANES_420, intra="ffv1", pix_fmt="yuv420p")
    head = fmt.parse_header(memoryview(group.data))
    assert head.predictor == "ffv1"
    assert [r.parts != () for r in head.records if r.kind == "raw"] == [True]  # gradient
    assert _same_bits(decode_group(group.data), flat)


def test_ffv1_records_of_earlier_coder_settings_still_decode(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Records written with other FFV1 options (the range coder with FFmpeg's own slice
    count, as stores written before four slices were set; Golomb-Rice) decode: each
    group's coder configuration travels in its header."""
    from hyperframes.hyper.codec import _planes

    frames = _planar_clip(6)
    for options in ({"g": "1", "level": "3", "coder": "1"}, {"g": "1", "level": "3"}):
        monkeypatch.setattr(_planes, "FFV1_OPTIONS", options)
        data = encode_group(frames, planes=PLANES_420, intra="ffv1", pix_fmt="yuv420p").data
        monkeypatch.undo()
        assert _same_bits(decode_group(data), frames)
        assert _same_bits(decode_frame(data, 5), frames[5])


def test_ffv1_groups_take_either_coder_and_decode(monkeypatch: pytest.MonkeyPatch) -> None:
    from hyperframes.hyper.codec import _planes

    frames = _planar_clip(5, h=96)
    planes = [(96, 64), (48, 32), (48, 32)]
    extradata = set()
    for gain in (2.0, -1e9):  # never the range coder; always
        monkeypatch.setattr(_planes, "RANGE_GAIN", gain)
        data = encode_group(frames, planes=planes, intra="ffv1", pix_fmt="yuv420p").data
        head = fmt.parse_header(memoryview(data))
        assert head.predictor == "ffv1" and any(r.parts == () for r in head.records)
        extradata.add(head.extradata)
        assert _same_bits(decode_group(data), frames)
    assert len(extradata) == 2


def _x264_group(n: int = 20, gop: int = 8, pix_fmt: str = "yuv420p") -> tuple[np.ndarray, bytes]:
    from hyperframes.io.layouts import Layout

    layout = Layout.of(pix_fmt, 48, 32)
    rng = np.random.default_rng(24)
    peak = 1023 if layout.dtype.itemsize == 2 else 255
    base = rng.integers(0, peak, layout.shape)
    frames = np.stack([(base + 3 * i) % peak for i in range(n)]).astype(layout.dtype)
    group = encode_group(frames, planes=layout.plane_shapes, pix_fmt=pix_fmt, intra="x264", gop=gop)
    assert group.layout == "gop" and group.tier == "lossless"
    return frames, group.data


def test_x264_groups_keep_a_keyframe_every_gop_frames_and_read_from_the_nearest() -> None:
    frames, data = _x264_group(20, 8)
    info = read_group_info(data)
    assert [i for i, t in enumerate(info.frames_touched) if t == 1] == [0, 8, 16]
    assert info.frames_touched[7] == 8 and info.frames_touched[19] == 4
    for i in (19, 3, 8, 0, 15):
        assert _same_bits(decode_frame(data, i), frames[i])
    assert _same_bits(decode_group(data), frames)


def _rewrite(data: bytes, change) -> bytes:
    header = fmt.parse_header(data)
    (size,) = struct.unpack("<I", data[4:8])
    head = json.loads(data[8 : 8 + size])
    change(head)
    meta = {k: v for k, v in head.items() if k != "frames"}
    records = [fmt.Record(*r) for r in head["frames"]]
    return fmt.pack(meta, records, data[header.payload_start :])


def test_an_x264_header_that_skips_packets_is_refused() -> None:
    _, data = _x264_group(6, 4)

    def skip(head: dict) -> None:
        head["frames"][3][1] = 1  # frame 3 would rest on frame 1, skipping frame 2's packet

    def layout(head: dict) -> None:
        head["layout"] = "anchors"

    for change in (skip, layout):
        with pytest.raises(StoreCorrupt, match="x264 records must run from keyframes"):
            fmt.parse_header(_rewrite(data, change))


def test_x264_options_are_checked() -> None:
    frames, _ = _x264_group(2, 1)
    with pytest.raises(ValueError, match="gop must be an int"):
        encode_group(frames, planes=[(32, 48), (16, 24), (16, 24)], pix_fmt="yuv420p",
                     intra="x264", gop=0)  # fmt: skip
    with pytest.raises(ValueError, match="needs the planes' pix_fmt"):
        encode_group(frames, planes=[(32, 48), (16, 24), (16, 24)], intra="x264")
    with pytest.raises(ValueError, match="gop= applies to intra='x264' only"):
        encode_group(frames, planes=[(32, 48), (16, 24), (16, 24)], pix_fmt="yuv420p",
                     intra="ffv1", gop=8)  # fmt: skip


@pytest.mark.parametrize("shape", [(4, 6, 3), (3, 4, 6, 3), (2, 2, 4, 6, 3), (5, 3)])
def test_the_colour_transform_undone_into_any_rows(shape: tuple[int, ...]) -> None:
    from hyperframes.hyper.codec._pixels import rct, unrct

    rgb = np.random.default_rng(3).integers(0, 256, shape, dtype=np.uint8)
    assert np.array_equal(unrct(rct(rgb)), rgb)
    if len(shape) == 4:  # into a group's band of rows (each frame's contiguous) or columns
        rows = np.zeros((shape[0], shape[1] + 3, *shape[2:]), np.uint8)
        assert np.array_equal(unrct(rct(rgb), rows[:, 1 : 1 + shape[1]]), rgb)
        assert np.array_equal(rows[:, 1 : 1 + shape[1]], rgb) and not rows[:, 0].any()
        columns = np.zeros((*shape[:2], shape[2] + 2, 3), np.uint8)
        unrct(rct(rgb), columns[:, :, 1:-1])
        assert np.array_equal(columns[:, :, 1:-1], rgb) and not columns[:, :, 0].any()
