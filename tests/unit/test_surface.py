"""The surface predictor of 16-bit frames: exact on every machine, lossless whatever the
frames, chosen where it pays, and its untrusted bytes checked."""

from __future__ import annotations

import time

import numpy as np
import pytest
import zstandard as zstd

from hyperframes.errors import StoreCorrupt
from hyperframes.hyper import decode_frame, decode_group, encode_group
from hyperframes.hyper.codec import _lossless, _surface
from hyperframes.hyper.codec import group_header as fmt


def _field(n: int, h: int, w: int, channels: int = 0, noise: float = 4.0) -> np.ndarray:
    """A simulation's frames (a corner of 512x512 ones): waves drifting over a smooth
    field, with sensor noise."""
    rng = np.random.default_rng(11)
    y, x = np.mgrid[0:h, 0:w] / 512
    frames = [2048 + 900 * np.sin(6 * x) * np.cos(4 * y) + 600 * np.sin(14 * (x + 0.3 * y) - t / 9)
              + rng.normal(0, noise, (h, w)) for t in range(n)]  # fmt: skip
    out = np.clip(np.stack(frames), 0, 4095).astype(np.uint16)
    return np.stack([out + 100 * c for c in range(channels)], axis=-1) if channels else out


def _exact_surface(knots: np.ndarray, h: int, w: int) -> np.ndarray:
    """The surface in Python's integers: floor(sum of weight products x (2 knot + 1) /
    2**25), modulo 2**16: what every machine must get."""
    rows = _surface._weights(h).astype(np.int64).astype(object)
    cols = _surface._weights(w).astype(np.int64).astype(object)
    out = []
    for grid in knots.astype(np.int64).astype(object):
        total = rows.dot(2 * grid + 1).dot(cols.T)
        out.append(np.vectorize(lambda v: (v // 2**25) % 2**16)(total).astype(np.uint16))
    return np.stack(out, axis=-1)


@pytest.mark.parametrize("shape", [(1, 1), (5, 3), (33, 17), (64, 96, 3), (130, 70, 4)])
def test_the_surface_is_the_exact_integer_one_at_the_knots_limits(shape) -> None:
    h, w = shape[:2]
    channels = shape[2] if len(shape) == 3 else 1
    kh, kw = _surface.knots_shape(h, w)
    rng = np.random.default_rng(len(shape) + h)
    limit = _surface.KNOT_LIMIT
    knots = rng.integers(-limit, limit, (channels, kh, kw), endpoint=True)
    knots.reshape(-1)[:2] = (limit, -limit)
    got = _surface.surface(knots, shape).reshape(h, w, channels)
    np.testing.assert_array_equal(got, _exact_surface(knots, h, w))


def test_every_pixel_weighs_four_knots_summing_to_one() -> None:
    for n in (1, 2, 31, 32, 33, 512, 1081):
        weights = _surface._weights(n)
        assert (weights.sum(axis=1) == _surface.WEIGHT_ONE).all()
        assert ((weights != 0).sum(axis=1) <= _surface.SUPPORT).all()
        assert weights.any(axis=0).all()  # (no knot that no pixel uses)
        rows = np.concatenate([np.tile(w, (count, 1)) for _, count, _, w in _surface._runs(n)])
        assert (rows.sum(axis=1) == _surface.WEIGHT_ONE).all() and len(rows) == n


def _predictor(data: bytes) -> str:
    return fmt.parse_header(data).predictor


def test_a_smooth_noisy_field_is_coded_alone_against_its_surface_and_far_smaller(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frames = _field(6, 128, 160)
    group = encode_group(frames)
    header = fmt.parse_header(group.data)
    assert header.predictor == "surface"
    assert all(r.kind == "raw" for r in header.records)  # (a frame reads from one record)
    np.testing.assert_array_equal(decode_group(group.data), frames)
    for i in (0, 3, 5):
        np.testing.assert_array_equal(decode_frame(group.data, i), frames[i])
    monkeypatch.setattr(fmt, "surface_frames", lambda shape, dtype: False)
    plain = encode_group(frames)
    assert _predictor(plain.data) == "none"
    assert len(group.data) < 0.8 * len(plain.data)


def test_deltas_that_a_quick_look_says_will_not_pay_are_not_coded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Noise adds up in a difference: a noisy field's deltas are judged on a sample and
    not coded (the same records as coding them first); frames that differ by a few
    pixels keep their deltas and copies."""
    coded: list[int] = []
    delta = _lossless._compress

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        coded.append(1)
        return delta(*args, **kwargs)

    frames = _field(12, 128, 96)
    monkeypatch.setattr(_lossless, "_compress", counted)
    judged = encode_group(frames)
    assert len(coded) == 1  # (the base's plain values, to choose the surface by)
    assert all(r.kind == "raw" for r in fmt.parse_header(judged.data).records)
    monkeypatch.setattr(_lossless, "surface_delta_may_pay", lambda *args: True)
    assert encode_group(frames).data == judged.data and len(coded) == 1 + 1 + 11
    monkeypatch.undo()
    still = np.repeat(frames[:1], 12, axis=0)
    still[5, 40:44, 10:30] += 7  # (a few pixels change, then change back)
    kinds = [r.kind for r in fmt.parse_header(encode_group(still).data).records]
    assert kinds.count("delta") == 2 and kinds.count("copy") == 9
    probe = zstd.ZstdCompressor(level=1).compress
    assert not _lossless.surface_delta_may_pay(frames[1], frames[0], 10_000, probe)
    assert _lossless.surface_delta_may_pay(still[5], still[0], 10_000, probe)
    assert _lossless.surface_delta_may_pay(frames[1, :60], frames[0, :60], 1, probe)  # (few rows)


@pytest.mark.parametrize("dtype", ["uint16", "int16"])
@pytest.mark.parametrize("shape", [(3, 5), (40, 70), (50, 36, 3), (20, 20, 2)])
def test_any_16_bit_frames_round_trip_bit_exact(dtype: str, shape: tuple[int, ...]) -> None:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(6)
    smooth = _field(4, *shape[:2], channels=shape[2] if len(shape) == 3 else 0)
    wild = rng.integers(info.min, info.max, (4, *shape), dtype, endpoint=True)
    edges = np.where(rng.random((4, *shape)) < 0.5, info.min, info.max).astype(dtype)
    spiky = smooth.astype(dtype)
    spiky.reshape(-1)[::37] = info.max  # (residuals beyond a byte beside small ones)
    for frames in (smooth.astype(dtype), wild, edges, spiky):
        group = encode_group(frames)
        np.testing.assert_array_equal(decode_group(group.data), frames)
        for i in range(len(frames)):
            np.testing.assert_array_equal(decode_frame(group.data, i), frames[i])


def test_frames_that_a_surface_does_not_fit_keep_their_plain_values() -> None:
    rng = np.random.default_rng(9)
    assert _predictor(encode_group(rng.integers(0, 65536, (3, 64, 64), np.uint16)).data) == "none"
    for other in (_field(2, 32, 32).astype(np.uint32), _field(2, 32, 32, channels=5)):
        assert _predictor(encode_group(other).data) == "none"
    assert _predictor(encode_group(_field(2, 32, 32), tier="psnr", psnr=50).data) == "none"


def _one_record_group(record: bytes, shape: list[int]) -> bytes:
    meta = {"dtype": "<u2", "shape": shape, "base": 0, "layout": "auto", "tier": "lossless",
            "predictor": "surface", "residuals": "zigzag"}  # fmt: skip
    return fmt.pack(meta, [fmt.Record("raw", -1, 0, len(record))], record)


def test_damaged_surface_records_raise_store_corrupt() -> None:
    frame = _field(1, 48, 64)[0]
    cctx = _surface.compressor(3)
    raw = zstd.ZstdDecompressor().decompress(_surface.encode(frame, cctx))
    k = 4 * np.prod(_surface.knots_shape(48, 64))
    assert len(raw) == frame.size + k  # (residuals of a byte each)
    wild = np.frombuffer(raw, "<i4", offset=len(raw) - k).copy()
    wild[0] = _surface.KNOT_LIMIT + 1
    np.testing.assert_array_equal(decode_group(_one_record_group(cctx.compress(raw), [48, 64]))[0],
                                  frame)  # fmt: skip
    for bad, words in [
        (raw[:-4], "a surface record holds"),
        (raw + bytes(3), "a surface record holds"),
        (raw[:-k] + wild.tobytes(), "knots are out of range"),
        (b"not zstd", "fails to decompress"),
    ]:
        record = bad if bad == b"not zstd" else cctx.compress(bad)
        with pytest.raises(StoreCorrupt, match=words):
            decode_group(_one_record_group(record, [48, 64]))
    started = time.perf_counter()  # (a forged frame of 2**30 samples: refused at once)
    with pytest.raises(StoreCorrupt, match="a surface record holds"):
        decode_group(_one_record_group(cctx.compress(raw), [1, 1 << 30]))
    assert time.perf_counter() - started < 1.0


@pytest.mark.parametrize(
    ("dtype", "shape", "residuals"),
    [("<u2", [8, 8], "plain"), ("|u1", [8, 8], None), ("<u4", [8, 8], "zigzag"),
     ("<u2", [8, 8, 5], "zigzag"), ("<u2", [8], "zigzag")],
)  # fmt: skip
def test_headers_that_claim_surface_records_for_other_frames_are_refused(
    dtype: str, shape: list[int], residuals: str | None
) -> None:
    meta = {"dtype": dtype, "shape": shape, "base": 0, "layout": "auto", "tier": "lossless",
            "predictor": "surface"}  # fmt: skip
    if residuals is not None:
        meta["residuals"] = residuals
    with pytest.raises(StoreCorrupt, match=r"surface records need|zigzagged residuals need"):
        fmt.parse_header(fmt.pack(meta, [fmt.Record("raw", -1, 0, 4)], b"\x00" * 4))


@pytest.mark.parametrize("frames", [range(0, 16), range(3, 9), range(8, 9), range(5, 5)])
def test_a_range_of_a_group_decodes_alone_or_with_its_references(frames: range) -> None:
    rng = np.random.default_rng(2)
    moving = np.repeat(rng.integers(0, 4000, (1, 24, 32), np.uint16), 16, axis=0)
    moving[:, :4] += np.arange(16, dtype=np.uint16)[:, None, None]  # (deltas)
    for group_frames in (moving, _field(16, 24, 32)):
        data = encode_group(group_frames).data
        header = fmt.parse_header(data)
        expected = group_frames[frames.start : frames.stop]
        np.testing.assert_array_equal(decode_group(data, frames=frames), expected)
        out = np.empty_like(expected)
        assert decode_group(data, frames=frames, out=out) is out
        np.testing.assert_array_equal(out, expected)
        alone = all(r.kind == "raw" for r in header.records)
        assert header.within(range(3, 9)) == alone  # (frame 3 refers to frame 2)
        assert header.within(range(16)) and header.within(range(5, 5))
    with pytest.raises(ValueError, match=r"a range within 0\.\.16"):
        decode_group(data, frames=range(10, 17))
