"""Grouping: rules, limits, streaming invariance and validation."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hyperframes.errors import FrameError
from hyperframes.hyper import Grouper, Span, frame_mse, frame_sse, group_frames, luma_proxy


def _frames(levels: list[int]) -> np.ndarray:
    """One 2x2 grey frame per level; adjacent MSE = (delta/255)**2."""
    return np.array(levels, dtype=np.uint8)[:, None, None].repeat(2, 1).repeat(2, 2)


def _check_cover(spans: list[Span], n: int, max_len: int) -> None:
    assert [s.start for s in spans] == [0, *(s.stop for s in spans[:-1])]
    assert spans[-1].stop == n
    assert all(1 <= s.length <= max_len for s in spans)


levels = st.lists(st.integers(0, 255), min_size=1, max_size=120)
lengths = st.integers(1, 12).flatmap(lambda lo: st.tuples(st.just(lo), st.integers(lo, 40)))


@settings(max_examples=150, deadline=None)
@given(levels=levels, lens=lengths, rule=st.sampled_from(["adjacent", "drift"]))
def test_groups_cover_every_frame_and_never_exceed_max_len(
    levels: list[int], lens: tuple[int, int], rule: str
) -> None:
    min_len, max_len = lens
    spans = group_frames(
        _frames(levels), threshold=1e-3, min_len=min_len, max_len=max_len, rule=rule
    )  # type: ignore[arg-type]
    _check_cover(spans, len(levels), max_len)


@settings(max_examples=100, deadline=None)
@given(levels=levels, lens=lengths, cuts=st.lists(st.integers(1, 20), max_size=20))
def test_batch_boundaries_do_not_change_groups(
    levels: list[int], lens: tuple[int, int], cuts: list[int]
) -> None:
    frames = _frames(levels)
    expected = group_frames(frames, threshold=2e-3, min_len=lens[0], max_len=lens[1])
    grouper = Grouper(threshold=2e-3, min_len=lens[0], max_len=lens[1])
    got, pos = [], 0
    for size in cuts:
        got += grouper.push_many(frames[pos : pos + size])
        pos += size
    got += grouper.push_many(frames[pos:])
    got += grouper.finish()
    assert got == expected


def test_noisy_pan_never_exceeds_max_len() -> None:
    # every adjacent pair differs: the old "join the one before" rule made 240-frame groups
    rng = np.random.default_rng(0)
    frames = rng.integers(0, 256, (240, 4, 4, 3), dtype=np.uint8)
    spans = group_frames(frames, threshold=1e-3, min_len=8, max_len=60)
    _check_cover(spans, 240, 60)
    assert all(s.length >= 8 for s in spans)


def test_static_then_cut() -> None:
    spans = group_frames(_frames([10] * 5 + [200] * 5), threshold=1e-3, min_len=1, max_len=60)
    assert spans == [Span(0, 5), Span(5, 10)]


def test_max_len_splits_static_run() -> None:
    spans = group_frames(_frames([7] * 10), threshold=1e-3, min_len=1, max_len=4)
    assert [s.length for s in spans] == [4, 4, 2]


def test_short_run_joins_the_closer_neighbour() -> None:
    # levels: 0 0 0 | 40 | 50 50 50 : the single 40 is closer to 50 (10) than to 0 (40)
    spans = group_frames(_frames([0, 0, 0, 40, 50, 50, 50]), threshold=1e-4, min_len=2, max_len=10)
    assert spans == [Span(0, 3), Span(3, 7)]
    spans = group_frames(_frames([0, 0, 0, 10, 50, 50, 50]), threshold=1e-4, min_len=2, max_len=10)
    assert spans == [Span(0, 4), Span(4, 7)]


def test_drift_rule_cuts_slow_ramps() -> None:
    ramp = _frames(list(range(0, 60, 2)))  # adjacent step 2/255: MSE 6.2e-5
    assert len(group_frames(ramp, threshold=1e-4, min_len=1, max_len=100)) == 1
    drift = group_frames(ramp, threshold=1e-4, min_len=1, max_len=100, rule="drift")
    assert len(drift) > 5


def test_groups_are_emitted_while_streaming() -> None:
    grouper = Grouper(threshold=1e-3, min_len=1, max_len=3)
    out = []
    for frame in _frames([5] * 9):
        out += grouper.push(frame)
    assert out == [Span(0, 3), Span(3, 6)]
    assert grouper.finish() == [Span(6, 9)]
    with pytest.raises(RuntimeError):
        grouper.push(_frames([5])[0])


def test_empty_sequence() -> None:
    assert group_frames([]) == []


def test_exact_sse_matches_integer_arithmetic() -> None:
    rng = np.random.default_rng(1)
    for dtype, top, shape in ((np.uint8, 255, (300, 700, 3)), (np.uint16, 65535, (90, 300, 3))):
        a = rng.integers(0, top + 1, shape).astype(dtype)
        b = rng.integers(0, top + 1, shape).astype(dtype)
        assert frame_sse(a, b) == int(((a.astype(np.int64) - b) ** 2).sum())
        extreme = frame_sse(np.zeros(shape, dtype), np.full(shape, top, dtype))
        assert extreme == top**2 * a.size
    a = np.zeros((3, 3), np.uint8)
    assert frame_mse(a, a + 255) == 1.0


def test_luma_proxy_groups_like_exact_on_cuts() -> None:
    frames = _frames([10] * 5 + [200] * 5).repeat(4, 1).repeat(4, 2)
    assert luma_proxy(frames[0]).shape == (2, 2)
    spans = group_frames(frames, threshold=1e-3, min_len=1, distance="luma")
    assert spans == [Span(0, 5), Span(5, 10)]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"threshold": 0.0},
        {"threshold": 1.5},
        {"threshold": float("nan")},
        {"threshold": True},
        {"min_len": 0},
        {"min_len": 5, "max_len": 4},
        {"max_len": 2.5},
        {"rule": "nearest"},
        {"distance": "fast"},
    ],
)
def test_bad_options_raise_value_error(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="must"):
        Grouper(**kwargs)


def test_frame_changing_shape_or_dtype_is_named() -> None:
    grouper = Grouper()
    grouper.push(np.zeros((4, 4), np.uint8))
    with pytest.raises(FrameError, match="frame 1"):
        grouper.push(np.zeros((4, 5), np.uint8))
    with pytest.raises(FrameError, match="frame 1"):
        grouper.push(np.zeros((4, 4), np.uint16))


def test_nan_and_unsupported_dtype_are_frame_errors() -> None:
    frames = np.zeros((3, 2, 2), np.float32)
    frames[2, 0, 0] = np.nan
    with pytest.raises(FrameError, match="frame 2"):
        group_frames(frames)
    with pytest.raises(FrameError, match="frame 0"):
        group_frames(np.zeros((2, 2, 2), np.int32))
    with pytest.raises(FrameError, match="frame 0"):
        group_frames([[1, 2]])  # type: ignore[list-item]
